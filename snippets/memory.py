# --8<-- [start:imports]
import torch

from gradflow_ref.checkpointing import SavedTensorMeter
from gradflow_ref.hardware import gpu
from gradflow_ref.memory import GPT, MemoryConfig, training_memory
from gradflow_ref.sharding import measure_fsdp2, predict_fsdp2, sharded_memory

device = "cuda" if torch.cuda.is_available() else "cpu"
GB = 1e9
# --8<-- [end:imports]

# --8<-- [start:memory_7b]
shape = dict(n_params=7_000_000_000, n_layers=32, hidden=4096, n_heads=32, seq_len=4096)
shape |= dict(micro_batch=1, vocab=32000, dropout=False, stores_scores=False)
plain = training_memory(MemoryConfig(**shape))
ckpt = training_memory(MemoryConfig(**shape, checkpointing="full"))
rows = {
    "parameters, FP32 (the master weights)": plain.weights,
    "gradients, FP32": plain.gradients,
    "AdamW m and v, FP32": plain.optimizer_states,
    "activations, no checkpointing": plain.activations,
    "activations, every layer checkpointed": ckpt.activations,
}
for name, nbytes in rows.items():
    print(f"{name:<38} {nbytes / GB:6.1f} GB")
state = plain.total - plain.activations
h100 = gpu("H100 SXM").memory_bytes
print(f"state {state / GB:.0f} GB = {state // shape['n_params']} bytes per parameter")
print(f"with checkpointing {ckpt.total / GB:.1f} GB; fits one H100 SXM: {ckpt.total <= h100}")
# --8<-- [end:memory_7b]

# --8<-- [start:trainer_layout]
trainer_layout = dict(param_dtype=torch.bfloat16, master_dtype=torch.float32)
trainer = training_memory(MemoryConfig(**shape, **trainer_layout))
trainer_state = trainer.total - trainer.activations
print(f"BF16 weights + FP32 masters: {trainer_state // shape['n_params']} bytes per parameter")
# --8<-- [end:trainer_layout]

# --8<-- [start:validation]
mask_bytes = 1 if device == "cuda" else 2
bf16_model = dict(param_dtype=torch.bfloat16, grad_dtype=torch.bfloat16)
small = MemoryConfig(2, 64, 4, seq_len=32, micro_batch=2, vocab=96, mask_bytes=mask_bytes)
small = MemoryConfig(**vars(small) | bf16_model)
torch.manual_seed(0)
model = GPT(small).to(device, torch.bfloat16)
idx = torch.randint(0, small.vocab, (small.micro_batch, small.seq_len)).to(device)
with SavedTensorMeter() as meter:
    model(idx, idx).backward()
predicted = training_memory(small)
weights = sum(p.numel() * p.element_size() for p in model.parameters())
grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters())
print(f"weights    : {weights} bytes counted, {predicted.weights} predicted")
print(f"gradients  : {grads} bytes counted, {predicted.gradients} predicted")
print(f"activations: {meter.bytes} bytes saved for backward, {predicted.activations} predicted")
# --8<-- [end:validation]

# --8<-- [start:sharding]
thirteen = dict(shape, n_params=13_000_000_000, n_layers=40, hidden=5120, n_heads=40)
models = {"7B": shape, "13B": thirteen}
models = {k: MemoryConfig(**s, checkpointing="full") for k, s in models.items()}
n_gpus, per_gpu = 8, {}
for name, model_cfg in models.items():
    per_gpu[name] = [sharded_memory(model_cfg, n_gpus, stage).total for stage in range(4)]
    cells = "  ".join(f"stage {s}: {b / GB:5.1f}" for s, b in enumerate(per_gpu[name]))
    print(f"{name:>3} on {n_gpus} GPUs, GB per GPU, {cells}")
fits_13b = [b <= h100 for b in per_gpu["13B"]]
assert fits_13b == [False, False, True, True]
# --8<-- [end:sharding]

# --8<-- [start:fsdp2_step]
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from gradflow_ref.sharding import FSDPRun


def fsdp2_step(rank: int, world_size: int, cfg: MemoryConfig) -> FSDPRun:
    dist.init_process_group("gloo")
    try:
        torch.manual_seed(0)
        model = GPT(cfg)
        mesh = init_device_mesh("cpu", (world_size,))
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block in model.layers:
            fully_shard(block, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        tokens = torch.randint(0, cfg.vocab, (cfg.micro_batch, cfg.seq_len + 1))
        model(tokens[:, :-1], tokens[:, 1:]).backward()
        opt.step()

        def local_bytes(tensors):
            return sum(t.to_local().numel() * t.element_size() for t in tensors)

        params = list(model.parameters())
        states = [opt.state[p][k] for p in params for k in ("exp_avg", "exp_avg_sq")]
        return FSDPRun(
            local_bytes(params), local_bytes(p.grad for p in params), local_bytes(states)
        )
    finally:
        dist.destroy_process_group()


# --8<-- [end:fsdp2_step]

# --8<-- [start:fsdp2]
tiny = MemoryConfig(n_layers=2, hidden=64, n_heads=4, seq_len=16, vocab=101)
n_ranks = 2
ranks = measure_fsdp2(tiny, n_ranks=n_ranks)
shapes = [tuple(p.shape) for p in GPT(tiny).parameters()]
expected = [predict_fsdp2(shapes, n_ranks, rank) for rank in range(n_ranks)]
for rank, got in enumerate(ranks):
    print(
        f"rank {rank}: parameters {got.parameters:,} B, gradients {got.gradients:,} B, "
        f"AdamW states {got.optimizer_states:,} B"
    )
# --8<-- [end:fsdp2]
