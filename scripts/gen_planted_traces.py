"""Real GPU traces with planted, known causes of slow training steps, each run also timed without a profiler.

Runs on a CUDA machine with PyTorch (torchvision and transformers for the real-model runs). Every run is
a training loop of one model, one precision mode and one planted cause (or none); for each run it
  1. times ``--steps`` steps without the profiler -- but in the process that profiles, after earlier runs
     were profiled (torch.profiler leaves CUPTI attached): not a clean time, so ``main`` records it as
     ``step_ms_in_profiling_process``. The step times
     traceq is held to come from ``measure_clean.py``, which times each run in fresh processes that never
     profile and then uses this module's ``run`` to record each trace in a fresh process of its own;
  2. records ``--prof-steps`` steps with torch.profiler (CPU + CUDA, input shapes; Python call stacks
     where the cause has a call site to find) and writes the Kineto chrome trace,
or, with ``--nsys``, runs steps inside NVTX ranges named ``train_step N`` for an outside ``nsys profile``.
``runs.json`` in ``--out`` gathers each run's settings and timings.

The causes (see the README's "Causes" table for what traceq should say about each):
  control     a GPU-bound MLP (big GEMMs): AMP's tensor cores win; nothing should be blamed
  host_sync   a NaN guard after every encoder layer (``bool(torch.isfinite(x).all())``): a sync per layer
  input       numpy feature augmentation in a DataLoader without workers, pageable host-to-device copies
  workers     the same pipeline fixed: 4 workers, pinned memory, non-blocking copies
  cudnn       ``cudnn.benchmark=True`` with a new sequence length every step (re-tuning per shape)
  allocator   ``torch.cuda.empty_cache()`` every step: cudaFree/cudaMalloc churn
  half        O2-style training: the model's weights in fp16, no autocast (the casts removed)
  noscale     autocast without GradScaler (mode ``autocast``): with ``half``, splits what the O2 fix removes
              into the scaler's share and autocast's own

Usage: python3 gen_planted_traces.py --out DIR [--only RUN,...] [--list] [--nsys] [--raw]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

#: where the runs go; PLANTED_DEVICE=cpu tries the script's logic on a machine without a GPU (no timings of use)
DEV = os.environ.get("PLANTED_DEVICE", "cuda")
CUDA = DEV.startswith("cuda")


def sync() -> None:
    if CUDA:
        torch.cuda.synchronize()


# -- models ---------------------------------------------------------------------------------------------
class Encoder(nn.Module):
    """A small speech-style Transformer encoder (features -> d_model, pre-norm layers, a token head)."""

    def __init__(
        self, idim: int = 80, d: int = 256, layers: int = 6, heads: int = 4, vocab: int = 512, nan_guard: bool = False
    ) -> None:
        super().__init__()
        self.inp = nn.Linear(idim, d)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, batch_first=True, norm_first=True)
            for _ in range(layers)
        )
        self.head = nn.Linear(d, vocab)
        self.nan_guard = nan_guard

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        for layer in self.layers:
            x = layer(x)
            if self.nan_guard:
                check_finite(x)
        return self.head(x)


def check_finite(x: torch.Tensor) -> None:
    """The planted host sync: a NaN guard that reads a device boolean on the host."""
    if not bool(torch.isfinite(x).all()):
        raise FloatingPointError("non-finite activations")


class ConvNet(nn.Module):
    """A 1-D convolutional acoustic model (conv + batch norm + ReLU blocks) over (B, 80, T) features."""

    def __init__(self, idim: int = 80, ch: int = 256, layers: int = 5, k: int = 5, vocab: int = 512) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        c = idim
        for _ in range(layers):
            blocks += [nn.Conv1d(c, ch, k, padding=k // 2), nn.BatchNorm1d(ch), nn.ReLU()]
            c = ch
        self.body = nn.Sequential(*blocks)
        self.head = nn.Conv1d(ch, vocab, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, F) -> (B, T, vocab)
        return self.head(self.body(x.transpose(1, 2))).transpose(1, 2)


class BigMLP(nn.Module):
    """GPU-bound control: large square GEMMs, where tensor cores make AMP several times faster."""

    def __init__(self, d: int = 4096, layers: int = 8, vocab: int = 512) -> None:
        super().__init__()
        self.layers = nn.Sequential(*(nn.Sequential(nn.Linear(d, d), nn.GELU()) for _ in range(layers)))
        self.inp = nn.Linear(80, d)
        self.head = nn.Linear(d, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layers(self.inp(x)))


# -- data -------------------------------------------------------------------------------------------------
class AugmentedFeatures(torch.utils.data.Dataset):
    """Log-mel-like features made and augmented in numpy per sample, as a CPU input pipeline does:
    noise, a band-pass filter along time by FFT, speed perturbation by interpolation, SpecAugment masks."""

    def __init__(self, n: int, frames: int, idim: int = 80, vocab: int = 512) -> None:
        self.n, self.frames, self.idim, self.vocab = n, frames, idim, vocab

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(i)
        x = rng.standard_normal((self.frames * 2, self.idim)).astype(np.float32)
        spec = np.fft.rfft(x, axis=0)
        spec[spec.shape[0] // 3 :] = 0
        x = np.fft.irfft(spec, n=x.shape[0], axis=0).astype(np.float32)
        grid = np.linspace(0, x.shape[0] - 1, self.frames)
        x = np.stack([np.interp(grid, np.arange(x.shape[0]), x[:, c]) for c in range(self.idim)], axis=1)
        x = x.astype(np.float32)
        for _ in range(2):
            t0 = rng.integers(0, self.frames - 20)
            x[t0 : t0 + 20] = 0
            f0 = rng.integers(0, self.idim - 8)
            x[:, f0 : f0 + 8] = 0
        x = (x - x.mean(0)) / (x.std(0) + 1e-5)
        y = rng.integers(0, self.vocab, self.frames)
        return x, y


# -- runs -------------------------------------------------------------------------------------------------
#: name -> settings. model: encoder | conv | mlp | resnet50 | resnet18 | bert; mode: fp32 | fp16 (autocast +
#: GradScaler) | autocast (fp16 autocast, no GradScaler) | half (fp16 weights, no autocast); cause: see the module
#: doc; stack: record Python stacks.
RUNS: dict[str, dict] = {
    "control_fp32": dict(model="mlp", mode="fp32", batch=4096, cause="control"),
    "control_fp16": dict(model="mlp", mode="fp16", batch=4096, cause="control"),
    "enc_fp32": dict(model="encoder", mode="fp32", batch=8),
    "enc_fp16": dict(model="encoder", mode="fp16", batch=8),
    "enc_stack_fp16": dict(model="encoder", mode="fp16", batch=8, stack=True),
    # pairs recorded in one process after a warm-up profile, none with Python stacks (whose tracer's cost
    # differs from process to process): what a comparison of clean and planted runs needs
    "base8_fp16": dict(model="encoder", mode="fp16", batch=8),
    "sync8_fp16": dict(model="encoder", mode="fp16", batch=8, cause="host_sync"),
    "input8_fp16": dict(model="encoder", mode="fp16", batch=8, cause="input"),
    "workers8_fp16": dict(model="encoder", mode="fp16", batch=8, cause="workers"),
    "half8_fp16": dict(model="encoder", mode="half", batch=8, cause="half"),
    "alloc8_fp16": dict(model="encoder", mode="fp16", batch=8, cause="allocator"),
    "base8_fp32": dict(model="encoder", mode="fp32", batch=8),
    "base128_fp16": dict(model="encoder", mode="fp16", batch=128),
    "sync128_fp16": dict(model="encoder", mode="fp16", batch=128, cause="host_sync"),
    "base128_fp32": dict(model="encoder", mode="fp32", batch=128),
    "sync128_fp32": dict(model="encoder", mode="fp32", batch=128, cause="host_sync"),
    "alloc128_fp32": dict(model="encoder", mode="fp32", batch=128, cause="allocator"),
    "sync_fp16": dict(model="encoder", mode="fp16", batch=8, cause="host_sync", stack=True),
    "enc_b128_fp16": dict(model="encoder", mode="fp16", batch=128, stack=True),
    "sync_b128_fp16": dict(model="encoder", mode="fp16", batch=128, cause="host_sync", stack=True),
    "enc_b128_fp32": dict(model="encoder", mode="fp32", batch=128, stack=True),
    "sync_b128_fp32": dict(model="encoder", mode="fp32", batch=128, cause="host_sync", stack=True),
    "sync_fp32": dict(model="encoder", mode="fp32", batch=8, cause="host_sync", stack=True),
    "half_fp16": dict(model="encoder", mode="half", batch=8, cause="half"),
    "alloc_fp16": dict(model="encoder", mode="fp16", batch=8, cause="allocator"),
    "input_fp16": dict(model="encoder", mode="fp16", batch=8, cause="input", stack=True),
    "workers_fp16": dict(model="encoder", mode="fp16", batch=8, cause="workers"),
    "cudnn_fixed_fp16": dict(model="conv", mode="fp16", batch=8, cause="cudnn_fixed", benchmark=True),
    "cudnn_var_fp16": dict(model="conv", mode="fp16", batch=8, cause="cudnn", benchmark=True, steps=10),
    "cudnn_var_fp32": dict(model="conv", mode="fp32", batch=8, cause="cudnn", benchmark=True, steps=10),
    "cudnn_var_nobench_fp16": dict(model="conv", mode="fp16", batch=8, cause="cudnn", benchmark=False),
    # a second model for the search: a new image size every step, searched (benchmark) or not
    "resnet18_var_fp16": dict(model="resnet18", mode="fp16", batch=8, cause="cudnn", benchmark=True, steps=4),
    "resnet18_var_nobench_fp16": dict(model="resnet18", mode="fp16", batch=8, cause="cudnn", benchmark=False, steps=4),
    "resnet50_b64_fp32": dict(model="resnet50", mode="fp32", batch=64),
    "resnet50_b64_fp16": dict(model="resnet50", mode="fp16", batch=64),
    "resnet18_b4_fp32": dict(model="resnet18", mode="fp32", batch=4),
    "resnet18_b4_fp16": dict(model="resnet18", mode="fp16", batch=4),
    "bert_b4_fp32": dict(model="bert", mode="fp32", batch=4),
    "bert_b4_fp16": dict(model="bert", mode="fp16", batch=4),
    # what the O2 fix removes, split: autocast alone (no GradScaler) and fp16 weights (no autocast)
    "enc_noscale_fp16": dict(model="encoder", mode="autocast", batch=8, cause="noscale"),
    "resnet18_b4_noscale_fp16": dict(model="resnet18", mode="autocast", batch=4, cause="noscale"),
    "resnet18_b4_half": dict(model="resnet18", mode="half", batch=4, cause="half"),
    "bert_b4_noscale_fp16": dict(model="bert", mode="autocast", batch=4, cause="noscale"),
    "bert_b4_half": dict(model="bert", mode="half", batch=4, cause="half"),
}
FRAMES = 256  # encoder sequence length


def build(cfg: dict) -> tuple[nn.Module, str]:
    """The model on the GPU and its task: 'seq' (per-frame tokens), 'image' or 'text'."""
    m = cfg["model"]
    if m == "encoder":
        return Encoder(nan_guard=cfg.get("cause") == "host_sync").to(DEV), "seq"
    if m == "conv":
        return ConvNet().to(DEV), "seq"
    if m == "mlp":
        return BigMLP().to(DEV), "tokens"
    if m in ("resnet50", "resnet18"):
        import torchvision

        return getattr(torchvision.models, m)(num_classes=1000).to(DEV), "image"
    if m == "bert":
        from transformers import BertConfig, BertForSequenceClassification

        return BertForSequenceClassification(BertConfig(num_labels=2)).to(DEV), "text"
    raise ValueError(m)


class Batches:
    """Each step's batch. Most runs reuse one batch made on the GPU (no input cost); ``input``/``workers``
    runs draw from a DataLoader; ``cudnn`` runs take a new sequence length every step."""

    def __init__(self, cfg: dict, task: str) -> None:
        self.cfg, self.task, self.b = cfg, task, cfg["batch"]
        self.step = 0
        cause = cfg.get("cause")
        if cause in ("input", "workers"):
            ds = AugmentedFeatures(100_000, FRAMES)
            fixed = cause == "workers"
            self.loader = torch.utils.data.DataLoader(
                ds,
                batch_size=self.b,
                shuffle=False,
                num_workers=4 if fixed else 0,
                pin_memory=fixed,
                persistent_workers=fixed,
                prefetch_factor=4 if fixed else None,
            )
            self.it = iter(self.loader)
            self.non_blocking = fixed
        else:
            self.loader = None
            self.fixed = self._make(FRAMES if task == "seq" else None)
        # cudnn: a new length (image side) every step, never repeated
        self.lengths = list(range(400, 1200, 8)) if task == "seq" else list(range(96, 480, 8))
        np.random.default_rng(1).shuffle(self.lengths)

    def _make(self, frames: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator(device=DEV).manual_seed(0)
        if self.task == "seq":
            return (
                torch.randn(self.b, frames, 80, device=DEV, generator=g),
                torch.randint(0, 512, (self.b, frames), device=DEV, generator=g),
            )
        if self.task == "tokens":
            return torch.randn(self.b, 80, device=DEV, generator=g), torch.randint(0, 512, (self.b,), device=DEV)
        if self.task == "image":
            side = frames or 224  # cudnn runs: a new image side every step
            return (
                torch.randn(self.b, 3, side, side, device=DEV, generator=g),
                torch.randint(0, 1000, (self.b,), device=DEV),
            )
        ids = torch.randint(0, 30000, (self.b, 128), device=DEV, generator=g)
        return ids, torch.randint(0, 2, (self.b,), device=DEV)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.step += 1
        if self.loader is not None:
            x, y = next(self.it)
            return x.to(DEV, non_blocking=self.non_blocking), y.to(DEV, non_blocking=self.non_blocking)
        if self.cfg.get("cause") == "cudnn":
            t = self.lengths[self.step % len(self.lengths)]
            return self._make(t)
        return self.fixed


def loss_of(model: nn.Module, task: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if task == "text":
        return model(input_ids=x, labels=y).loss
    out = model(x)
    if task == "seq":
        return F.cross_entropy(out.float().reshape(-1, out.shape[-1]), y.reshape(-1))
    return F.cross_entropy(out.float(), y)


class Trainer:
    def __init__(self, cfg: dict) -> None:
        self.cfg = cfg
        torch.manual_seed(0)
        torch.backends.cudnn.benchmark = bool(cfg.get("benchmark", False))
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.model, self.task = build(cfg)
        self.mode = cfg["mode"]
        if self.mode == "half":
            self.model.half()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4, eps=1e-4 if self.mode == "half" else 1e-8)
        self.scaler = torch.amp.GradScaler(DEV) if self.mode == "fp16" else None
        self.data = Batches(cfg, self.task)

    def step(self) -> None:
        x, y = self.data.next()
        if self.mode == "half" and x.is_floating_point():
            x = x.half()
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast(DEV.split(":")[0], dtype=torch.float16, enabled=self.mode in ("fp16", "autocast")):
            loss = loss_of(self.model, self.task, x, y)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()
        if self.cfg.get("cause") == "allocator" and CUDA:
            torch.cuda.empty_cache()


def time_steps(tr: Trainer, n: int) -> tuple[float, list[float]]:
    """(wall ms per step over ``n`` back-to-back steps, ms of each of ``n`` steps run one by one)."""
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        tr.step()
    sync()
    total = (time.perf_counter() - t0) / n * 1e3
    each = []
    for _ in range(n):
        s = time.perf_counter()
        tr.step()
        sync()
        each.append((time.perf_counter() - s) * 1e3)
    return total, each


def run(name: str, out: str, steps: int, prof_steps: int, nsys: bool, gzip_traces: bool = True) -> dict:
    cfg = RUNS[name]
    steps = cfg.get("steps", steps)
    tr = Trainer(cfg)
    for _ in range(5):
        tr.step()
    step_ms, each = time_steps(tr, steps)
    rec = {
        "run": name,
        **cfg,
        "steps_timed": steps,
        "step_ms": round(step_ms, 3),
        "step_ms_each_median": round(statistics.median(each), 3),
        "step_ms_each_min": round(min(each), 3),
        "step_ms_each_max": round(max(each), 3),
        "samples_per_s": round(cfg["batch"] / step_ms * 1e3, 2),
    }
    if nsys:  # an outside nsys records these steps; NVTX ranges as users name them, PyTorch op ranges
        sync()
        t0 = time.perf_counter()
        with torch.autograd.profiler.emit_nvtx(record_shapes=False):
            for i in range(prof_steps):
                torch.cuda.nvtx.range_push(f"train_step {i + 1}")
                tr.step()
                torch.cuda.nvtx.range_pop()
        sync()
        rec["nsys_step_ms"] = round((time.perf_counter() - t0) / prof_steps * 1e3, 3)
        rec["trace"] = f"nsys_{name}.sqlite.gz"
        return rec
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if CUDA else [])
    sched = torch.profiler.schedule(wait=1, warmup=1, active=prof_steps)
    path = os.path.join(out, name + ".json")
    t0 = time.perf_counter()
    with torch.profiler.profile(
        activities=acts, record_shapes=True, with_stack=bool(cfg.get("stack")), schedule=sched
    ) as prof:
        for _ in range(2 + prof_steps):
            tr.step()
            prof.step()
    sync()
    rec["profiled_wall_ms_per_step"] = round((time.perf_counter() - t0) / (2 + prof_steps) * 1e3, 3)
    prof.export_chrome_trace(path)
    rec["json_bytes"] = os.path.getsize(path)
    if gzip_traces:  # else left raw: packed together, xz compresses the JSON about twice as well as gzip
        with open(path, "rb") as f, gzip.open(path + ".gz", "wb", compresslevel=6) as g:
            shutil.copyfileobj(f, g)
        os.remove(path)
    rec["trace"] = name + ".json.gz"
    rec["prof_steps"] = prof_steps
    rec["record_shapes"] = True
    rec["with_stack"] = bool(cfg.get("stack"))
    return rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="planted")
    ap.add_argument("--only", default="")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--prof-steps", type=int, default=5)
    ap.add_argument("--nsys", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--raw", action="store_true", help="leave traces as .json (not gzipped)")
    a = ap.parse_args()
    if a.list:
        print("\n".join(RUNS))
        return
    os.makedirs(a.out, exist_ok=True)
    names = [n for n in a.only.split(",") if n] or list(RUNS)
    log = os.path.join(a.out, "runs.jsonl")
    if not a.nsys:  # the profiler's one-time start-up costs are paid here, not by the first run
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            torch.ones(8, device=DEV).sum().item()
    for name in names:
        t0 = time.perf_counter()
        try:
            rec = run(name, a.out, a.steps, a.prof_steps, a.nsys, gzip_traces=not a.raw)
        except Exception as e:  # one broken run must not cost the others
            rec = {"run": name, "error": f"{type(e).__name__}: {e}"}
        if "step_ms" in rec:  # this process profiled before (or runs under nsys): named so, never a clean time
            rec["step_ms_in_profiling_process"] = rec.pop("step_ms")
            rec.pop("samples_per_s", None)
        rec["seconds"] = round(time.perf_counter() - t0, 1)
        rec["env"] = {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "gpu": torch.cuda.get_device_name(0) if CUDA else "cpu",
            "cudnn": torch.backends.cudnn.version(),
        }
        print(json.dumps(rec), flush=True)
        with open(log, "a") as f:
            f.write(json.dumps(rec) + "\n")
        if CUDA:
            torch.cuda.empty_cache()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
    sys.exit(0)
