"""Read-only facts about a model: types ONNX infers, sequence lengths."""
