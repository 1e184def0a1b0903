"""Chrome-trace JSON (PyTorch/Kineto, PaddlePaddle): the decoder (C scanner, msgspec reference), what both
producers share, and each producer's meaning."""
