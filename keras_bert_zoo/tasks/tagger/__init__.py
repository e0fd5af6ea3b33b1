"""The tagger task: its spec (`spec`, no Keras), its behaviour and model (Keras)."""
