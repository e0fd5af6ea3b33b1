"""One module per `kbz` command: `add_parser(subcommands)` declares its flags (argparse only)
and `run(args)` does the work and prints its lines, importing its job (Keras, TensorFlow)
only then, so that `kbz --help`, `--version` and `kbz presets` answer at once.

A new command is a module here with those two functions and its entry in `COMMANDS`, whose
order is `kbz --help`'s.
"""

from keras_bert_zoo.cli.commands import (
    convert,
    create_pretraining_data,
    embed,
    export,
    finetune,
    predict,
    presets,
    pretrain,
)

COMMANDS = (presets, convert, finetune, create_pretraining_data, pretrain, predict, export, embed)
