"""Write the hand-made example models in examples/ from ONNX text.

python scripts/make_examples.py
"""

from __future__ import annotations

import pathlib

import onnx

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"

# A map over images of varying size: their shapes, their column sums, and
# a brightened copy that reads a tensor from outside the body.
SHAPES_AND_SUMS = """<ir_version: 8, opset_import: ["" : 17]>
shapes_and_sums (seq(float[H,W]) images, float gain) => (seq(int64[2]) shapes, seq(float[W]) sums,
                                                         seq(float[H,W]) brighter) {
  [per_image] shapes, sums, brighter = SequenceMap <body = per_image (float[H,W] image)
      => (int64[2] shape, float[W] sum, float[H,W] bright) {
        shape = Shape(image)
        rows = Constant <value = int64[1] {0}> ()
        sum = ReduceSum <keepdims = 0> (image, rows)
        bright = Mul(image, gain)
      }> (images)
}"""


def main() -> None:
    model = onnx.parser.parse_model(SHAPES_AND_SUMS)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, EXAMPLES / "shapes_and_sums.onnx")
    print("wrote examples/shapes_and_sums.onnx")


if __name__ == "__main__":
    main()
