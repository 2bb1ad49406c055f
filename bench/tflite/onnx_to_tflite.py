"""Converts one ONNX model to a float32 .tflite with onnx2tf (bench/tflite/zoo.sh).

    onnx_to_tflite.py MODEL.onnx OUT.tflite

onnx2tf compares its TensorFlow graph with the ONNX one on a batch of sample images that it
downloads from GitHub, which these machines cannot reach; a fixed synthetic batch stands in
(its values only feed that comparison, not the converted weights). The .tflite is written
next to a scratch saved model and moved into place only when the conversion succeeded.
"""

import glob
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx2tf.onnx2tf as converter


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    source, target = sys.argv[1], sys.argv[2]
    # A batch the size of onnx2tf's own (20 images); the spatial size follows the model's
    # input where it is 4-D NCHW, 224x224 otherwise.
    import onnx

    dims = [d.dim_value for d in onnx.load(source, load_external_data=False).graph.input[0]
            .type.tensor_type.shape.dim]
    h, w = (dims[2], dims[3]) if len(dims) == 4 and dims[2] > 0 and dims[3] > 0 else (224, 224)
    batch = np.random.default_rng(0).random((20, h, w, 3), dtype=np.float32)
    converter.download_test_image_data = lambda: batch
    with tempfile.TemporaryDirectory() as scratch:
        converter.convert(input_onnx_file_path=source, output_folder_path=scratch,
                          not_use_onnxsim=True, non_verbose=True)
        found = glob.glob(os.path.join(scratch, "*_float32.tflite"))
        if len(found) != 1:
            print(f"{source}: onnx2tf wrote no float32 .tflite", file=sys.stderr)
            return 1
        partial = target + ".partial"
        shutil.copyfile(found[0], partial)
        os.replace(partial, target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
