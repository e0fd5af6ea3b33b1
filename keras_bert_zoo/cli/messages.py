"""A library error in the words of the command line: flags, not Python arguments.

The package names its arguments as Python does, in Keras' style ("`sequence_length` must be
at most 512. Received: sequence_length=600", "pass overwrite=True"); `kbz` shows the same
error with the command's own flags ("--sequence-length must be at most 512. Received:
--sequence-length 600", "pass --overwrite"). The translation is derived from the command's
parser (the argument `x_y` is the flag `--x-y` when the command has it), plus `ALIASES` for
the arguments whose flag has another name or belongs to another command.
"""

import argparse
import re

# A Python argument's form -> (the flag's destination, what to say where the command lacks it).
ALIASES = {"load_weights=False": ("from_scratch", "kbz pretrain --from-scratch")}
_NAME = re.compile(r"`([a-z][a-z0-9_]*)`")
_ASSIGNMENT = re.compile(r"\b([a-z][a-z0-9_]*)=('[^']*'|\"[^\"]*\"|[^\s,;()]+?)(?=[.,;)]*(\s|$))")


def command_flags(parser: argparse.ArgumentParser, *path) -> dict:
    """`{destination: action}` of the optional arguments of `kbz <path...>`; a subcommand left
    out of `path` (`kbz predict` without its task) contributes every one of its choices'."""
    actions, parsers = list(parser._actions), [parser]
    for name in [*path, None]:
        children = []
        for current in parsers:
            for action in current._actions:
                if isinstance(action, argparse._SubParsersAction):
                    chosen = [action.choices[name]] if name in action.choices else []
                    children += chosen if name is not None else list(action.choices.values())
        actions += [a for child in children for a in child._actions]
        parsers = children
        if not parsers:
            break
    return {a.dest: a for a in actions if any(o.startswith("--") for o in a.option_strings)}


def _flag(action) -> str:
    return next(o for o in action.option_strings if o.startswith("--"))


def _assignment(flags: dict, match: re.Match) -> str:
    name, value = match.group(1), match.group(2).strip("'\"")
    action = flags.get(name)
    if action is None:
        return match.group(0)
    if isinstance(action, argparse.BooleanOptionalAction) and value in ("True", "False"):
        return _flag(action) if value == "True" else f"--no-{_flag(action)[2:]}"
    if action.nargs == 0:  # store_true / store_const
        return _flag(action) if value == str(action.const) else match.group(0)
    return f"{_flag(action)} {value}"


def for_command_line(message: str, flags: dict) -> str:
    """`message` with each Python argument the command has a flag for named by that flag."""
    for python, (destination, elsewhere) in ALIASES.items():
        action = flags.get(destination)
        message = message.replace(python, _flag(action) if action else elsewhere)
    message = _NAME.sub(lambda m: _flag(flags[m[1]]) if m[1] in flags else m[0], message)
    return _ASSIGNMENT.sub(lambda m: _assignment(flags, m), message)


# A path that is missing, a directory or not one: the user's input, exit status 2.
PATH_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError)


def describe(error: Exception, flags: dict) -> str:
    """The one line `kbz` prints for `error`: an operating-system error as `path: problem`
    (no `[Errno N]`), any other in the command's flags."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        where = error.filename if error.filename2 is None else error.filename2
        return f"{where}: {error.strerror[0].lower()}{error.strerror[1:]}."
    return for_command_line(str(error), flags)
