"""Reader for SQuAD JSON (v1.1 and v2.0): one `SquadExample` per question.

Training and evaluation files need an answer (or `is_impossible`) per question; questions to
answer (`kbz predict qa`) may have none (`answers_optional=True`; `labelled` is then False).

Every problem is a `ValueError` naming the file, where in it, what was expected and the fix
(`readers.file_error`).

>>> examples = kbz.data.read_squad("examples/data/squad_heldout_sample.json")
"""

import dataclasses
import functools
import json

from keras_bert_zoo.data.readers import PathLike, file_error, read_lines


@dataclasses.dataclass(frozen=True)
class SquadAnswer:
    text: str
    start: int  # character offset of `text` in the context


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One SQuAD question; `answers` is empty for SQuAD 2.0 unanswerable questions, and for a
    question to answer (`labelled` False: no `answers` and no `is_impossible` in the file)."""

    qas_id: str
    question: str
    context: str
    answers: tuple[SquadAnswer, ...]
    is_impossible: bool = False
    title: str = ""
    labelled: bool = True


def _position(raw: str, qas_id: str) -> str:
    """`L, column C` of a question id in the raw JSON text (SQuAD files are often one line)."""
    offset = max(raw.find(json.dumps(qas_id)), 0)
    line, column = raw.count("\n", 0, offset) + 1, offset - raw.rfind("\n", 0, offset)
    return f"{line}, column {column} (question id {qas_id!r})"


def _parse_answers(path, qa, context, where):
    answers = []
    for answer in qa.get("answers", []):
        text, start = answer.get("text"), answer.get("answer_start")
        if not isinstance(text, str) or not isinstance(start, int):
            raise file_error(
                path,
                where(),
                "an answer needs a string `text` and an integer `answer_start`",
                "Fix the answer entry.",
            )
        if context[start : start + len(text)] != text:
            raise file_error(
                path,
                where(),
                f"answer text {text!r} does not match the context at "
                f"answer_start={start} (found "
                f"{context[start : start + len(text)]!r})",
                "Fix `answer_start` to the character offset of the answer.",
            )
        answers.append(SquadAnswer(text, start))
    return tuple(answers)


def _parse_articles(path, raw, articles, answers_optional) -> list[SquadExample]:
    examples = []
    for article in articles:
        for paragraph in article.get("paragraphs", []):
            context = paragraph.get("context")
            for qa in paragraph.get("qas", []):
                qas_id = str(qa.get("id", ""))
                where = functools.partial(_position, raw, qas_id)
                if not isinstance(context, str) or not qas_id or "question" not in qa:
                    raise file_error(
                        path,
                        where(),
                        "a question needs `id`, `question` and a paragraph `context`",
                        "Fix the entry.",
                    )
                answers = _parse_answers(path, qa, context, where)
                impossible = bool(qa.get("is_impossible", False))
                if not answers and not impossible and not answers_optional:
                    raise file_error(
                        path,
                        where(),
                        "question has no answers",
                        'Add an answer, or mark it "is_impossible": true (SQuAD 2.0).',
                    )
                examples.append(
                    SquadExample(
                        qas_id,
                        qa["question"],
                        context,
                        () if impossible else answers,
                        impossible,
                        article.get("title", ""),
                        labelled=bool(answers) or impossible,
                    )
                )
    return examples


def read_squad(path: PathLike, answers_optional: bool = False) -> list[SquadExample]:
    """Reads a SQuAD v1.1 or v2.0 JSON file; answers are checked against their context.

    With `answers_optional`, questions without `answers` (new questions to answer) read too.

    >>> examples = kbz.data.read_squad("examples/data/squad_train_sample.json")
    >>> examples[0].answers[0].text
    'Denver Broncos'
    """
    raw = "\n".join(read_lines(path, "a SQuAD JSON file"))
    schema = (
        'Use the SQuAD JSON schema: {"data": [{"title", "paragraphs": [{"context", '
        '"qas": [{"id", "question", "answers": [{"text", "answer_start"}]}]}]}]}.'
    )
    try:
        articles = json.loads(raw)["data"]
    except json.JSONDecodeError as error:
        raise file_error(
            path,
            error.lineno,
            f"is not valid JSON ({error.msg}, column {error.colno})",
            "Fix the JSON syntax.",
        ) from None
    except (KeyError, TypeError):
        raise file_error(path, 1, "has no top-level `data` list", schema) from None
    try:
        examples = _parse_articles(path, raw, articles, answers_optional)
    except (AttributeError, TypeError) as error:
        raise file_error(
            path, None, f"does not follow the SQuAD schema ({error})", schema
        ) from None
    if not examples:
        raise file_error(path, None, "has no questions", schema)
    return examples
