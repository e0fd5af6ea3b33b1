"""FLOPs of BERT's training and inference steps, and the GPUs' dense bf16 peaks, for MFU.

Model FLOPs, as MFU counts them (PaLM, appendix B): the matrix multiplications a standard BERT
needs for the work, whatever an implementation saves or adds (our classifier computes its last
block at `[CLS]` only; transformers' pretraining head projects every position to the
vocabulary, not only the masked ones). A training step is 3 forward passes (forward, and the
backward pass's two products per matmul), so per sequence of length L with P masked positions:

    train = 6 x (encoder matmul parameters x L + MLM head matmul parameters x P)
            + 12 x layers x hidden x L^2          (attention scores and context)

with encoder matmul parameters = layers x (4 x hidden^2 + 2 x hidden x intermediate) and MLM
head = hidden^2 + hidden x vocabulary (the tied decoder). Embedding lookups, LayerNorm,
softmax, biases and the pooler are left out (under 1% for BERT-base at L = 128).
"""

# Dense (no sparsity) bf16/fp16 tensor-core peaks, TFLOP/s, from NVIDIA's data sheets; the
# first name found in the device name wins, so "H100 PCIe" comes before "H100".
GPU_PEAK_TFLOPS = (("H100 PCIe", 756.0), ("H100", 989.4), ("H200", 989.4), ("A100", 312.0))


def gpu_peak_tflops(device_name: str) -> float | None:
    """The data-sheet dense bf16 peak of the GPU called `device_name`, or None if unknown."""
    for key, tflops in GPU_PEAK_TFLOPS:
        if key in device_name:
            return tflops
    return None


def encoder_matmul_parameters(architecture: dict) -> int:
    hidden = architecture["hidden_dim"]
    return architecture["num_layers"] * (
        4 * hidden * hidden + 2 * hidden * architecture["intermediate_dim"]
    )


def attention_flops(architecture: dict, length: int) -> int:
    """Forward + backward FLOPs of attention's two products (scores and context)."""
    return 12 * architecture["num_layers"] * architecture["hidden_dim"] * length * length


def pretraining_flops(architecture: dict, length: int, predictions: int) -> float:
    """Train FLOPs of one sequence (forward + backward) of MLM + NSP pretraining."""
    hidden = architecture["hidden_dim"]
    mlm_head = hidden * hidden + hidden * architecture["vocabulary_size"]
    return 6 * (
        encoder_matmul_parameters(architecture) * length + mlm_head * predictions
    ) + attention_flops(architecture, length)


def classifier_flops(architecture: dict, length: int) -> float:
    """Train FLOPs of one sequence of a classifier (the head's are negligible)."""
    return 6 * encoder_matmul_parameters(architecture) * length + attention_flops(
        architecture, length
    )
