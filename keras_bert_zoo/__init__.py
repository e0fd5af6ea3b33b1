"""keras-bert-zoo: BERT for Keras 3: presets, pretraining (MLM + NSP), fine-tuning, export.

>>> import keras_bert_zoo as kbz
>>> enc = kbz.from_preset("bert_tiny_en_uncased", load_weights=False)
>>> pre = kbz.BertPreprocessor.from_preset("bert_tiny_en_uncased", sequence_length=128)

Names are imported when first used (PEP 562), so `import keras_bert_zoo` and the `kbz`
command line start without importing Keras or TensorFlow. A `.keras` file loads with
`kbz.load_model(path)`; `keras.models.load_model` works too once a model name of this
package has been used (that registers its layers with Keras), or when Keras was imported
before this package.

Importing the package changes nothing in the process (no allocator option, import hook or
backend setting); `kbz.tune_process()` applies what the `kbz` command's processes run with.
"""

import importlib
import sys

from keras_bert_zoo._lazy import lazy_attributes

__version__ = "0.1.0"

_SUBPACKAGES = (
    "architecture",
    "checkpoints",
    "data",
    "encoder",
    "export",
    "finetuning",
    "jobs",
    "layers",
    "lora",
    "metrics",
    "model",
    "packed_encoder",
    "presets",
    "pretraining",
    "ranking_metrics",
    "saving",
    "tasks",
    "tokenization",
    "training",
)
_EXPORTS = {
    "BertClassifier": "keras_bert_zoo.tasks.classifier.task",
    "BertEmbedder": "keras_bert_zoo.tasks.embedder.task",
    "BertModel": "keras_bert_zoo.model",
    "BertQuestionAnswerer": "keras_bert_zoo.tasks.question_answerer.task",
    "BertReranker": "keras_bert_zoo.tasks.reranker.task",
    "BertTagger": "keras_bert_zoo.tasks.tagger.task",
    "BertPreprocessor": "keras_bert_zoo.tokenization",
    "BertTokenizer": "keras_bert_zoo.tokenization",
    "build_classifier": "keras_bert_zoo.task_graphs",
    "build_embedder": "keras_bert_zoo.task_graphs",
    "build_encoder": "keras_bert_zoo.encoder",
    "build_pretrainer": "keras_bert_zoo.pretraining",
    "build_question_answerer": "keras_bert_zoo.task_graphs",
    "build_reranker": "keras_bert_zoo.task_graphs",
    "build_tagger": "keras_bert_zoo.task_graphs",
    "enable_lora": "keras_bert_zoo.lora",
    "export_onnx": "keras_bert_zoo.export",
    "export_saved_model": "keras_bert_zoo.export",
    "from_preset": "keras_bert_zoo.presets.factory",
    "list_presets": "keras_bert_zoo.presets.registry",
    "load_lora_weights": "keras_bert_zoo.saving.adapters",
    "load_model": "keras_bert_zoo.tasks.models",
    "merge_lora": "keras_bert_zoo.lora",
    "save_lora_weights": "keras_bert_zoo.saving.adapters",
    "save_preset": "keras_bert_zoo.saving.models",
    "tune_process": "keras_bert_zoo.host_memory",
}
__all__ = sorted([*_EXPORTS, *_SUBPACKAGES, "__version__"])
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, _SUBPACKAGES)

if "keras" in sys.modules:  # Keras is loaded already: register our layers with it now
    importlib.import_module(f"{__name__}.task_graphs")
