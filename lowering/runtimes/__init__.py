"""The runtimes the output is for, and how to run them.

:mod:`.profiles` (what each runtime lacks), :mod:`.ort_kernels` (which
onnxruntime kernels exist, from the generated ``ort_kernels.json``),
:mod:`.sessions` (one onnxruntime session factory) and :mod:`.runners`
(every other runtime, one child process per run).
"""
