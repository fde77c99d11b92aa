import math

import pytest
import torch
import torch.nn.functional as F

from gradflow_ref.transformer import Transformer, TransformerConfig, get_batch, shakespeare


def _model(**kw):
    torch.manual_seed(0)
    return Transformer(TransformerConfig(**kw))


def test_transformer_returns_fp32_logits_per_token():
    x, _ = get_batch(shakespeare(), 3, 32, torch.Generator().manual_seed(0))
    assert _model()(x).shape == (3, 32, 256)
    assert _model()(x).dtype == torch.float32


def test_transformer_depth_init_scales_residual_projections():
    model = _model(n_layers=8, hidden=64)
    expected = 0.02 / math.sqrt(16)
    for block in model.blocks:
        for w in (block.attn.proj.weight, block.mlp[2].weight):
            assert abs(w.std().item() - expected) < 0.1 * expected
    plain = _model(n_layers=8, hidden=64, depth_init=False)
    assert abs(plain.blocks[0].attn.proj.weight.std().item() - 0.02) < 0.002


def test_transformer_is_causal():
    model = _model(qk_norm=True)
    x, _ = get_batch(shakespeare(), 2, 16, torch.Generator().manual_seed(1))
    y = x.clone()
    y[:, 10:] = 0
    torch.testing.assert_close(model(x)[:, :10], model(y)[:, :10])


def test_transformer_records_attention_statistics():
    model = _model(n_layers=3)
    x, _ = get_batch(shakespeare(), 2, 16, torch.Generator().manual_seed(1))
    model(x)
    for block in model.blocks:
        assert math.isfinite(block.attn.max_logit.item())
        assert 0 < block.attn.entropy.item() <= math.log(16)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_transformer_post_ln_ends_normalised(norm):
    model = _model(norm=norm, n_layers=2)
    x, _ = get_batch(shakespeare(), 2, 16, torch.Generator().manual_seed(1))
    h = model.wte(x) + model.wpe(torch.arange(16))
    for block in model.blocks:
        h = block(h)
    normalised = torch.allclose(h.mean(-1), torch.zeros(2, 16), atol=1e-5)
    assert normalised == (norm == "post")


def test_get_batch_targets_are_next_bytes():
    data = shakespeare()
    x, y = get_batch(data, 4, 8, torch.Generator().manual_seed(2))
    torch.testing.assert_close(x[:, 1:], y[:, :-1])
    assert bytes(data[:9].tolist()).startswith(b"First")


def test_transformer_config_rejects_heads_not_dividing_hidden():
    with pytest.raises(
        ValueError, match="`hidden` \\(30\\) must be a multiple of `n_heads` \\(4\\)"
    ):
        TransformerConfig(hidden=30, n_heads=4)


def test_transformer_config_rejects_unknown_norm():
    with pytest.raises(ValueError, match="`norm` must be one of 'pre', 'post', got 'mid'"):
        TransformerConfig(norm="mid")


def test_transformer_rejects_too_long_input():
    with pytest.raises(ValueError, match="at most 32 tokens"):
        _model()(torch.zeros(1, 33, dtype=torch.long))


def test_get_batch_rejects_short_data():
    with pytest.raises(ValueError, match="longer than seq_len \\(8\\)"):
        get_batch(torch.arange(5), 1, 8, torch.Generator())


def test_transformer_loss_falls_with_adamw():
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data, g = shakespeare(), torch.Generator().manual_seed(0)
    losses = []
    for _ in range(30):
        x, y = get_batch(data, 8, 32, g)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 1.0
