"""`python -m keras_bert_zoo.cli ...` runs the `kbz` command line."""

import sys

from keras_bert_zoo.cli import main

sys.exit(main())
