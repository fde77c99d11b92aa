"""tools.bench: the host-speed figure printed beside the timings."""

from __future__ import annotations

import torch

from tools.bench import host_speed


def test_host_speed_counts_steps_on_one_thread_and_restores_the_thread_count(monkeypatch):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    seen = []
    backward = torch.Tensor.backward

    def counted(self, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return backward(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "backward", counted)
    try:
        speed = host_speed(0.2)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert seen and set(seen) == {1}, "the steps ran on more than one thread"
    assert 0.5 * len(seen) / 0.2 < speed <= 1.5 * len(seen) / 0.2
