# --8<-- [start:hand_calc]
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
depth = 50
for factor in (0.9, 0.95, 1.0, 1.1):
    print(f"{factor:<4} ** {depth} = {factor**depth:.6g}")
assert 0.95**depth < 0.1
# --8<-- [end:hand_calc]

# --8<-- [start:chain]
from gradflow_ref.telephone import chain_gradients

fading = chain_gradients(0.9, depth=depth, device=device)
growing = chain_gradients(1.1, depth=depth, device=device)
for factor, g in ((0.9, fading), (1.1, growing)):
    print(f"factor {factor}: layer {depth} passes back {g[-1]:.4f}, layer 1 passes back {g[0]:.6g}")
assert torch.isclose(fading[0], torch.tensor(0.9**depth, dtype=fading.dtype))
# --8<-- [end:chain]

# --8<-- [start:network]
from gradflow_ref.telephone import network_gradients

exact = network_gradients(0.9, depth=depth, init="orthogonal", device=device)
rough = network_gradients(0.9, depth=depth, init="xavier", device=device)
print(f"0.9 ** {depth}:                {0.9**depth:.6f}")
print(f"orthogonal weights x 0.9: {exact[0]:.6f}")
print(f"Gaussian weights x 0.9:   {rough[0]:.6f}")
assert abs(exact[0] / 0.9**depth - 1) < 1e-9
# --8<-- [end:network]

# --8<-- [start:figure]
import matplotlib.pyplot as plt

factors = (0.8, 0.9, 0.95, 1.0, 1.05, 1.1)
fig, ax = plt.subplots()
for factor in factors:
    g = network_gradients(factor, depth=depth, init="orthogonal", device=device).cpu()
    ax.plot(range(1, depth + 1), g, marker="o", markersize=2.5, label=f"factor {factor}")
ax.set_yscale("log")
ax.set_xlabel("layer (1 = closest to the input)")
ax.set_ylabel("gradient norm, relative to the output")
ax.set_title(f"Gradient reaching each layer of a {depth}-layer network")
ax.legend(ncol=3, fontsize="small")
# --8<-- [end:figure]

# --8<-- [start:underflow]
zero_after = {}
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    g = chain_gradients(0.5, depth=200, dtype=dtype, device=device).flip(0)
    zero_after[dtype] = int((g == 0).nonzero()[0]) + 1
    print(f"{str(dtype):<15} 0.5 ** {zero_after[dtype]} is stored as exactly 0")
# --8<-- [end:underflow]
