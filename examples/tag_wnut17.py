"""Named-entity tagging on WNUT-17 in a Keras script: word lists and word tags in, one tag
per word out (`kbz.BertTagger` aligns them to word pieces: the first piece of each word).

python examples/tag_wnut17.py            # 1,000 training sentences, 300 dev sentences
python examples/tag_wnut17.py --fast     # 256 sentences, 4 epochs: entities in about a minute

Runs on TensorFlow, JAX or PyTorch (`KERAS_BACKEND`).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from _common import DATA, parse_args, real_preset  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402


def read(path, count=None):
    sentences = kbz.data.read_conll(path).sentences[:count]
    return [s.words for s in sentences], [s.tags for s in sentences]


def main():
    args = parse_args(__doc__)
    preset = real_preset(args.preset, args.output)
    # --fast: enough steps to tag entities (a new head's bias starts at the tags' log
    # frequencies, so a few steps tag every word O, as an untrained tagger should)
    words, tags = read(DATA / "wnut17_train_sample.conll", 256 if args.fast else None)
    dev_words, dev_tags = read(DATA / "wnut17_dev_sample.conll", 64 if args.fast else None)
    # the tag set of the whole training file (--fast trains on part of it)
    labels = kbz.data.read_conll(DATA / "wnut17_train_sample.conll").tag_names

    tagger = kbz.BertTagger.from_preset(preset, labels=labels, sequence_length=64)
    tagger.fit(x=words, y=tags, epochs=4 if args.fast else 3, seed=args.seed)
    scores = tagger.evaluate(dev_words, dev_tags)
    print("dev entity precision {precision:.3f} recall {recall:.3f} F1 {f1:.3f}".format(**scores))
    print(list(zip(dev_words[0], tagger.tag(dev_words[:1])[0], strict=True)))


if __name__ == "__main__":
    main()
