"""`kbz presets`: the bundled presets, one line each."""


def add_parser(subcommands) -> None:
    parser = subcommands.add_parser("presets", help="list the bundled presets")
    parser.set_defaults(run=run)


def run(args) -> int:
    from keras_bert_zoo.presets import registry  # when run: --help stays instant

    for name in registry.list_presets():
        config = registry.load_preset_config(name)
        arch = config.architecture
        print(
            f"{name:26s} L{arch['num_layers']:<3d} H{arch['hidden_dim']:<5d} "
            f"A{arch['num_heads']:<3d} params {config.num_parameters:>12,}  "
            f"{'uncased' if config.lowercase else 'cased':8s} "
            f"{config.metadata.get('description', '')}"
        )
    return 0
