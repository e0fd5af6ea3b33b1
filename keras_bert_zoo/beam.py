"""Apache Beam's `RunInference` with kbz models: `KbzModelHandler`.

A `ModelHandler` (`apache_beam.ml.inference.base`) whose elements are raw inputs and whose
`PredictionResult.inference` is the decoded output (`jobs.predictors`, the code `kbz embed`
and `kbz predict` run):

- embedder: a text -> a float32 vector;
- classifier: a text or a `(text, text)` pair -> `{"label", "scores"}` (`{"score"}`, regression);
- tagger: a text (split at whitespace) or a list of words -> `{"words", "tags"}`;
- reranker: a `(query, passage)` pair -> `{"score"}`;
- question_answerer: `{"question", "context"}` -> `{"answer", "nbest"}`.
 Beam batches elements of similar length (`BatchElements`' `length_fn` and
`bucket_boundaries`, in characters), and each batch is sorted into token-length buckets
inside, as `kbz embed` does. The model loads once per worker process and is shared by its
threads. Nothing here depends on a runner: the same pipeline runs on the local runners and on
Dataflow, Flink or Spark (`examples/beam_embed.py`).

Install with `pip install "keras-bert-zoo[beam]"` (and a backend extra).

>>> import apache_beam as beam
>>> from apache_beam.ml.inference.base import RunInference
>>> from keras_bert_zoo.beam import KbzModelHandler
>>> with beam.Pipeline() as p:
...     vectors = (p | beam.Create(["a text", "another"])
...                  | RunInference(KbzModelHandler("all_minilm_l6_v2")))
"""

from collections.abc import Iterable, Sequence

from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from keras_bert_zoo.jobs.predictors import Predictor, load_predictor
from keras_bert_zoo.tasks import registry
from keras_bert_zoo.tasks.embedder.spec import EMBEDDER

# Element lengths (characters) that separate Beam's batches: a batch of short texts is not
# padded to a long one's length. Tokens are about a quarter of the characters in English.
_BUCKET_BOUNDARIES = [32, 64, 128, 256, 512, 1024]


def _length(element) -> int:
    if isinstance(element, str):
        return len(element)
    if isinstance(element, dict):
        return sum(len(str(v)) for v in element.values())
    return sum(len(str(v)) for v in element)


class KbzModelHandler(ModelHandler):
    """Runs a kbz task model on raw elements; see the module.

    Args:
        model: a preset name or directory, or a `kbz finetune` run directory.
        task: "embedder" (any preset), or the task a model was fine-tuned for:
            "classifier", "tagger", "reranker", "question_answerer".
        sequence_length: tokens per input (default: the run's, else the preset's).
        batch_size: rows per forward pass inside a Beam batch.
        min_batch_size, max_batch_size: Beam's batch bounds (elements).
    """

    def __init__(
        self,
        model,
        task: str = EMBEDDER.name,
        sequence_length: int | None = None,
        batch_size: int = 64,
        min_batch_size: int = 1,
        max_batch_size: int = 512,
    ):
        registry.get(task)  # an unknown task's error lists the known ones
        super().__init__()
        self._model, self._task = str(model), task
        self._sequence_length, self._batch_size = sequence_length, batch_size
        self._batching = {"min_batch_size": min_batch_size, "max_batch_size": max_batch_size}

    def load_model(self) -> Predictor:
        return load_predictor(self._model, self._task, self._sequence_length, self._batch_size)

    def run_inference(
        self, batch: Sequence, model: Predictor, inference_args=None
    ) -> Iterable[PredictionResult]:
        outputs = model(list(batch))
        for element, output in zip(batch, outputs, strict=True):
            yield PredictionResult(element, model.decode(output), self._model)

    def batch_elements_kwargs(self) -> dict:
        return {
            **self._batching,
            "length_fn": _length,
            "bucket_boundaries": _BUCKET_BOUNDARIES,
        }

    def share_model_across_processes(self) -> bool:
        return False  # one copy per worker process: Keras models do not cross processes

    def get_num_bytes(self, batch: Sequence) -> int:
        return sum(_length(e) for e in batch)

    def get_metrics_namespace(self) -> str:
        return "kbz"
