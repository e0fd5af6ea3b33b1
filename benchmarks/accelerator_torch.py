"""The anchor half of `benchmarks/accelerator.py`: transformers' `BertForPreTraining` in torch.

The same pretraining steps as the Keras half (same architecture, synthetic batch, MLM + NSP
loss, AdamW with BERT's decay exclusions and global-norm clipping 1.0), the way a
transformers user gets speed on a GPU: bf16 autocast over float32 weights, SDPA attention,
`torch.compile` and the fused AdamW. transformers' head projects every position to the
vocabulary (labels -100 where nothing is masked); the FLOPs counted are the same as ours.
Run by `benchmarks/accelerator.py` in a child process, after the Keras child has exited, so
each framework has the whole GPU.
"""

import sys
import time

import torch
import transformers
from accelerator_common import is_out_of_memory, pretraining_batch, run_jobs
from flops import gpu_peak_tflops, pretraining_flops

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def device_name() -> str:
    return f"cuda: {torch.cuda.get_device_name()}" if DEVICE == "cuda" else "cpu"


def synchronize():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def bert_for_pretraining(architecture):
    config = transformers.BertConfig(
        vocab_size=architecture["vocabulary_size"],
        hidden_size=architecture["hidden_dim"],
        num_hidden_layers=architecture["num_layers"],
        num_attention_heads=architecture["num_heads"],
        intermediate_size=architecture["intermediate_dim"],
        max_position_embeddings=architecture["max_sequence_length"],
        type_vocab_size=architecture["num_segments"],
        hidden_act="gelu_new" if architecture["gelu_approximate"] else "gelu",
        hidden_dropout_prob=architecture["dropout"],
        attention_probs_dropout_prob=architecture["dropout"],
    )
    torch.manual_seed(0)
    model = transformers.BertForPreTraining._from_config(config, attn_implementation="sdpa")
    return model.to(DEVICE).train()


def optimizer_for(model):
    no_decay = ("bias", "LayerNorm")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)]},
        {
            "params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
            "weight_decay": 0.0,
        },
    ]
    return torch.optim.AdamW(groups, lr=1e-4, eps=1e-6, weight_decay=0.01, fused=DEVICE == "cuda")


def torch_batch(batch, length, predictions, vocabulary_size):
    x, y, _ = pretraining_batch(batch, length, predictions, vocabulary_size)
    ids = torch.from_numpy(x["token_ids"]).long()
    labels = torch.full_like(ids, -100)
    positions = torch.from_numpy(x["mask_positions"]).long()
    labels.scatter_(1, positions, torch.from_numpy(y["mlm_logits"]).long())
    inputs = {
        "input_ids": ids,
        "token_type_ids": torch.from_numpy(x["segment_ids"]).long(),
        "attention_mask": torch.from_numpy(x["padding_mask"]).long(),
        "labels": labels,
        "next_sentence_label": torch.from_numpy(y["nsp_logits"]).long(),
    }
    return {key: value.to(DEVICE) for key, value in inputs.items()}


def train_step(job, batch):
    model = bert_for_pretraining(job["architecture"])
    optimizer = optimizer_for(model)
    run = torch.compile(model) if job["compile"] else model
    inputs = torch_batch(
        batch, job["length"], job["predictions"], job["architecture"]["vocabulary_size"]
    )

    def step():
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            loss = run(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return step


def measure(job, batch):
    step = train_step(job, batch)
    start = time.perf_counter()
    for _ in range(job["warmup_steps"]):
        loss = step()
    synchronize()
    first = time.perf_counter() - start
    best = float("inf")
    for _ in range(job["repeats"]):
        start = time.perf_counter()
        for _ in range(job["steps"]):
            loss = step()
        synchronize()
        best = min(best, (time.perf_counter() - start) / job["steps"])
    loss = float(loss.detach())
    peak = gpu_peak_tflops(torch.cuda.get_device_name()) if DEVICE == "cuda" else None
    flops = pretraining_flops(job["architecture"], job["length"], job["predictions"])
    tflops = flops * batch / best / 1e12
    return {
        "batch": batch,
        "sequences_per_second": batch / best,
        "tflops": tflops,
        "mfu": tflops / peak if peak else None,
        "first_seconds": first,
        "loss": loss,
        "finite": loss == loss and abs(loss) != float("inf"),
        "compiled": job["compile"],
    }


def cleanup():
    torch._dynamo.reset()  # forget the last model's compiled graphs and their guards
    if DEVICE == "cuda":
        torch.cuda.empty_cache()


def pretrain(job):
    notes = []
    for batch in job["batches"]:
        try:
            row = measure(job, batch)
            row["note"] = "; ".join(notes)
            return row
        except Exception as error:  # noqa: BLE001 (only running out of memory is retried)
            if not is_out_of_memory(error):
                raise
            notes.append(f"batch {batch} did not fit")
            cleanup()
    raise RuntimeError("; ".join(notes))


def main(plan, results_path, deadline):
    environment = {
        "impl": "transformers/torch",
        "device": device_name(),
        "versions": f"torch {torch.__version__}, transformers {transformers.__version__}",
    }
    run_jobs(plan, {"pretrain": pretrain}, results_path, deadline, environment, cleanup)


if __name__ == "__main__":
    main(*sys.argv[1:])
