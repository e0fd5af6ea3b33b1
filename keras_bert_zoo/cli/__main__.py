"""`python -m keras_bert_zoo.cli ...` runs the `kbz` command line."""

from keras_bert_zoo.cli import run

run()
