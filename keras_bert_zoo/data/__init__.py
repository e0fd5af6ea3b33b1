"""Fine-tuning data: readers (GLUE TSV, CoNLL, SQuAD JSON, reranking TSV, embedding pairs),
SQuAD windows and post-processing, and word-to-sub-word label alignment for taggers.

>>> import keras_bert_zoo as kbz
>>> train = kbz.data.read_glue_tsv("examples/data/sst2_sample.tsv")
>>> train.label_names
['0', '1']
"""

from keras_bert_zoo.data.conll_reader import (
    TaggedSentence,
    TaggingData,
    read_conll,
    tag_vocabulary,
)
from keras_bert_zoo.data.pairs_reader import PairsData, read_pairs
from keras_bert_zoo.data.readers import (
    ClassificationData,
    TextExample,
    read_glue_tsv,
    sorted_labels,
    tsv_header,
)
from keras_bert_zoo.data.rerank_reader import RankingData, RankingPair, read_ranking_tsv
from keras_bert_zoo.data.squad import SquadFeatures, build_squad_features, doc_spans
from keras_bert_zoo.data.squad_answers import nbest_predictions, postprocess, squad_evaluate
from keras_bert_zoo.data.squad_reader import SquadAnswer, SquadExample, read_squad
from keras_bert_zoo.data.tagging import align_labels, encode_tagged, word_predictions

__all__ = [
    "ClassificationData",
    "PairsData",
    "RankingData",
    "RankingPair",
    "SquadAnswer",
    "SquadExample",
    "SquadFeatures",
    "TaggedSentence",
    "TaggingData",
    "TextExample",
    "align_labels",
    "build_squad_features",
    "doc_spans",
    "encode_tagged",
    "nbest_predictions",
    "postprocess",
    "read_conll",
    "read_glue_tsv",
    "read_pairs",
    "read_ranking_tsv",
    "read_squad",
    "sorted_labels",
    "squad_evaluate",
    "tag_vocabulary",
    "tsv_header",
    "word_predictions",
]
