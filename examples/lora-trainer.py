#!/usr/bin/env python3
"""A preemptible LoRA fine-tuning job for a Haru standby GPU (PyTorch + PEFT).

The supervisor starts this command on a standby domain's GPU and stops it when the domain is promoted:
SIGTERM first, SIGKILL after the fleet's `trainingStopGraceMs`. The job therefore has to be correct when it
is stopped at *any* instant:

* ``HARU_GPU_INDEX`` pins it to its GPU: ``CUDA_VISIBLE_DEVICES`` is set before torch is imported (kept
  when the supervisor named the slot's MIG instance there), so the job never touches (or allocates a CUDA
  context on) the GPU of another slot.
* ``HARU_CHECKPOINT_DIR`` holds its checkpoints. Each one is written into a temporary directory, flushed
  to disk, marked complete and then renamed into place, and only then does the ``latest`` pointer move
  (write-to-temp + fsync + ``os.replace``). A SIGKILL in the middle of a save leaves at worst a temporary
  directory that the next start removes; the previous checkpoint stays intact.
* On start it resumes from the newest complete checkpoint: adapter weights, optimizer, LR schedule, RNG
  state and the position in the data, so no batch is trained twice or skipped.
* After every step it reports ``{step, totalSteps, loss}`` to the supervisor by replacing the file named in
  ``HARU_TRAINING_PROGRESS_FILE`` (shown by ``haru domain status``; an HF ``Trainer`` does the same from a
  ``TrainerCallback``, see ``progress_callback`` below).
* On SIGTERM it finishes the step in flight, saves, and exits 0 well within the grace; during the model load,
  with nothing to save yet, SIGTERM ends it at once.

Usage (the command of a training slot, see examples/supervisor.json):
    python3 examples/lora-trainer.py --base-model Qwen/Qwen2.5-0.5B-Instruct [--data train.jsonl]

``--data`` is a JSON-lines file with a ``text`` field per line; without it a small built-in corpus is used
so the template runs as-is. Requires torch, transformers and peft (``pip install torch transformers peft``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sys
import time
from typing import Any, Optional

CHECKPOINT_PREFIX = "ckpt-"
COMPLETE_MARKER = "COMPLETE"
LATEST_POINTER = "latest"
KEEP_CHECKPOINTS = 2


# ---------------------------------------------------------------------------------------------------------
# Crash-safe checkpoint files. Plain Python (no torch) so they can be tested anywhere.
# ---------------------------------------------------------------------------------------------------------


def fsync_dir(path: str) -> None:
    """Flushes a directory entry (a rename or a new file) to disk; a no-op where directories cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: str, text: str) -> None:
    """Replaces ``path`` with ``text`` so that a reader (or a restart after SIGKILL) sees the old or the new content, never a mix."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def checkpoint_step(name: str) -> Optional[int]:
    """The step of a checkpoint directory name (``ckpt-000120`` -> 120); None for anything else."""
    m = re.fullmatch(re.escape(CHECKPOINT_PREFIX) + r"(\d+)", name)
    return int(m.group(1)) if m else None


def is_complete(path: str) -> bool:
    return os.path.isfile(os.path.join(path, COMPLETE_MARKER))


def begin_checkpoint(root: str, step: int) -> str:
    """Creates and returns an empty temporary directory to write the checkpoint of ``step`` into."""
    tmp = os.path.join(root, f".{CHECKPOINT_PREFIX}{step:06d}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    return tmp


def commit_checkpoint(root: str, tmp: str, step: int) -> str:
    """Marks the temporary checkpoint complete, renames it into place and moves ``latest`` to it."""
    for name in os.listdir(tmp):
        with open(os.path.join(tmp, name), "rb") as f:
            os.fsync(f.fileno())
    atomic_write_text(os.path.join(tmp, COMPLETE_MARKER), json.dumps({"step": step}))
    final = os.path.join(root, f"{CHECKPOINT_PREFIX}{step:06d}")
    shutil.rmtree(final, ignore_errors=True)  # a rerun of the same step after a crash between rename and pointer
    os.rename(tmp, final)
    fsync_dir(root)
    atomic_write_text(os.path.join(root, LATEST_POINTER), os.path.basename(final))
    return final


def latest_checkpoint(root: str) -> Optional[str]:
    """The newest complete checkpoint: the ``latest`` pointer if it names one, else the highest complete step."""
    if not os.path.isdir(root):
        return None
    try:
        with open(os.path.join(root, LATEST_POINTER), encoding="utf-8") as f:
            named = os.path.join(root, f.read().strip())
        if checkpoint_step(os.path.basename(named)) is not None and is_complete(named):
            return named
    except OSError:
        pass
    steps = sorted(
        (s, n)
        for n in os.listdir(root)
        if (s := checkpoint_step(n)) is not None and is_complete(os.path.join(root, n))
    )
    return os.path.join(root, steps[-1][1]) if steps else None


def clean_checkpoints(root: str, keep: int = KEEP_CHECKPOINTS) -> None:
    """Removes temporaries left by a killed save, incomplete checkpoints, and all but the newest ``keep``."""
    if not os.path.isdir(root):
        return
    newest = latest_checkpoint(root)
    complete = []
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if name.startswith(f".{CHECKPOINT_PREFIX}") or name.startswith(f"{LATEST_POINTER}.tmp-"):
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)
            continue
        step = checkpoint_step(name)
        if step is None:
            continue
        if not is_complete(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            complete.append((step, path))
    for _, path in sorted(complete)[:-keep] if keep > 0 else []:
        if path != newest:
            shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------
# Progress for the supervisor (docs/architecture.md section 6.4).
# ---------------------------------------------------------------------------------------------------------


def report_progress(step: int, total_steps: Optional[int], loss: Optional[float]) -> None:
    """Replaces ``$HARU_TRAINING_PROGRESS_FILE`` with this step's figures; a no-op without the variable.

    Write-then-rename, so the supervisor never reads half an object; no fsync: a figure lost in a crash is
    replaced by the next step's, and an fsync per step would slow training for nothing.
    """
    path = os.environ.get("HARU_TRAINING_PROGRESS_FILE")
    if not path:
        return
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"step": step, "totalSteps": total_steps, "loss": loss}, f)
    os.replace(tmp, path)


def progress_callback() -> Any:
    """The same report from a Hugging Face ``Trainer``: ``Trainer(..., callbacks=[progress_callback()])``."""
    from transformers import TrainerCallback

    class ProgressCallback(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Optional[dict] = None, **kwargs: Any) -> None:
            loss = (logs or {}).get("loss")
            report_progress(state.global_step, state.max_steps or None, float(loss) if loss is not None else None)

    return ProgressCallback()


# ---------------------------------------------------------------------------------------------------------
# Training.
# ---------------------------------------------------------------------------------------------------------

BUILTIN_CORPUS = [
    "Haru keeps a standby domain asleep and trains adapters in the VRAM it frees.",
    "A verified promotion stops training, checks that the GPU memory is released, wakes vLLM and probes it.",
    "Routing moves with one compare-and-swap on the fleet's pointer.",
    "Checkpoints are written to a temporary directory and renamed into place.",
]


class StopRequested:
    """SIGTERM/SIGINT: while loading, the end at once; while training, a request the loop honours.

    Until the first step there is nothing to save (the newest checkpoint on disk is complete), so the signals
    keep the kernel's default action, which ends the process even inside a long C call such as reading the
    weights: a Python handler would only run once that call returns, and a stop during a minutes-long model
    load would spend the whole grace. ``training()`` then installs handlers that record the signal, and the
    loop saves and exits at the next step boundary.
    """

    def __init__(self) -> None:
        self.signal: Optional[int] = None
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)

    def training(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.signal = signum

    def __bool__(self) -> bool:
        return self.signal is not None


def log(event: str, **fields: Any) -> None:
    print(json.dumps({"time": time.time(), "event": event, **fields}), flush=True)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--base-model", required=True, help="Hugging Face model id or local path")
    p.add_argument("--data", help="JSON-lines file with a `text` field (default: a small built-in corpus)")
    p.add_argument("--max-steps", type=int, default=100_000)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lora-alpha", type=int, default=32)
    p.add_argument("--save-every-steps", type=int, default=50)
    p.add_argument("--save-every-seconds", type=float, default=120.0)
    p.add_argument("--seed", type=int, default=1234)
    return p.parse_args(argv)


def pin_gpu() -> None:
    """Restricts this process to its slot's GPU before torch initialises CUDA.

    A MIG instance the supervisor chose (``CUDA_VISIBLE_DEVICES=MIG-...``) stays; anything else, an inherited
    list of every GPU included, becomes HARU_GPU_INDEX, numbered as nvidia-smi numbers GPUs (PCI bus order).
    """
    index = os.environ.get("HARU_GPU_INDEX")
    if index is None or not index.isdigit():
        sys.exit("lora-trainer: HARU_GPU_INDEX must be set to the GPU this slot owns")
    if not os.environ.get("CUDA_VISIBLE_DEVICES", "").startswith("MIG-"):
        os.environ["CUDA_VISIBLE_DEVICES"] = index
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"


def load_texts(path: Optional[str]) -> list[str]:
    if not path:
        return BUILTIN_CORPUS * 64
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def batch_indices(n: int, batch_size: int, seed: int, epoch: int, offset: int) -> list[int]:
    """The example indices of the batch at ``offset`` in ``epoch``: a deterministic shuffle, so a resume continues the same order."""
    import torch

    g = torch.Generator().manual_seed(seed + epoch)
    order = torch.randperm(n, generator=g).tolist()
    return order[offset : offset + batch_size]


def save(root: str, step: int, model: Any, optimizer: Any, scheduler: Any, state: dict) -> None:
    import torch

    if is_complete(os.path.join(root, f"{CHECKPOINT_PREFIX}{step:06d}")):
        return  # nothing trained since that checkpoint (stopped right after a resume): keep it as it is
    tmp = begin_checkpoint(root, step)
    model.save_pretrained(tmp)  # the adapter only: a few MB
    torch.save(
        {
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng_cpu": torch.get_rng_state(),
            "rng_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        },
        os.path.join(tmp, "training.pt"),
    )
    atomic_write_text(os.path.join(tmp, "state.json"), json.dumps(state))
    commit_checkpoint(root, tmp, step)
    clean_checkpoints(root)


def train(args: argparse.Namespace, root: str, stop: StopRequested) -> int:
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.base_model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    base = AutoModelForCausalLM.from_pretrained(args.base_model, torch_dtype=dtype).to(device)

    resume = latest_checkpoint(root)
    if resume:
        model = PeftModel.from_pretrained(base, resume, is_trainable=True)
    else:
        lora = LoraConfig(r=args.lora_r, lora_alpha=args.lora_alpha, lora_dropout=0.05, task_type="CAUSAL_LM")
        model = get_peft_model(base, lora)
    model.train()
    optimizer = torch.optim.AdamW((p for p in model.parameters() if p.requires_grad), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.max_steps)
    state = {"step": 0, "epoch": 0, "offset": 0}
    if resume:
        blob = torch.load(os.path.join(resume, "training.pt"), map_location="cpu", weights_only=False)
        optimizer.load_state_dict(blob["optimizer"])
        scheduler.load_state_dict(blob["scheduler"])
        torch.set_rng_state(blob["rng_cpu"])
        if blob["rng_cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(blob["rng_cuda"])
        with open(os.path.join(resume, "state.json"), encoding="utf-8") as f:
            state = json.load(f)
        log("resumed", checkpoint=resume, **state)
    else:
        log("started", base_model=args.base_model, device=device)

    texts = load_texts(args.data)
    stop.training()  # from here on a SIGTERM lets the step in flight finish and is followed by a save
    last_save = time.monotonic()
    while state["step"] < args.max_steps and not stop:
        if state["offset"] >= len(texts):
            state["epoch"] += 1
            state["offset"] = 0
        idx = batch_indices(len(texts), args.batch_size, args.seed, state["epoch"], state["offset"])
        enc = tokenizer(
            [texts[i] for i in idx],
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=args.seq_len,
        ).to(device)
        labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
        loss = model(**enc, labels=labels).loss
        loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        state["step"] += 1
        state["offset"] += len(idx)
        report_progress(state["step"], args.max_steps, float(loss))
        due = state["step"] % args.save_every_steps == 0 or time.monotonic() - last_save >= args.save_every_seconds
        if due:
            save(root, state["step"], model, optimizer, scheduler, state)
            last_save = time.monotonic()
            log("checkpoint", step=state["step"], loss=float(loss))

    # Stopped (SIGTERM) or finished: one last checkpoint so the next start loses nothing.
    save(root, state["step"], model, optimizer, scheduler, state)
    log("stopped" if stop else "finished", step=state["step"], signal=stop.signal)
    return 0


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    root = os.environ.get("HARU_CHECKPOINT_DIR")
    if not root:
        sys.exit("lora-trainer: HARU_CHECKPOINT_DIR must be set")
    pin_gpu()
    stop = StopRequested()  # before the (slow) model load: a SIGTERM during loading ends it at once
    os.makedirs(root, exist_ok=True)
    clean_checkpoints(root)
    return train(args, root, stop)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
