/* The ONNX frontend: a model.onnx (opset 13 and later) lowered into the same
 * IR as a .mdl file.
 *
 * The protobuf is read with protobuf-c from Debian's onnx.proto (compiled
 * at build time).  The graph becomes one `forward` function: graph inputs
 * become INPUT nodes (their names made C identifiers), graph outputs its
 * outputs, and each ONNX node one or a few IR nodes built from the ops that
 * ir/ops.def has.  Initializers become parameters with their own names, so
 * the safetensors and checkpoint machinery works unchanged; their values
 * come back in mlc_onnx_weights for the driver to load.  Tensors known at
 * compile time (initializers, Constant, Shape, ...) are kept as data so
 * that the operands ONNX passes as tensors but mlc needs as numbers (a
 * Reshape's shape, a Slice's starts) can be read.
 *
 * Every error names the file, the node (its index and name), its op type
 * and the opset; an op or attribute mlc cannot lower is an error, never a
 * guess.
 */
#ifndef MLC_FRONTEND_ONNX_H
#define MLC_FRONTEND_ONNX_H

#include "frontend/frontend.h"

/* Lowers the serialized ModelProto in buf[0..len) into p.  `name` is the
 * file's name for messages; `path` is where the file lies, whose directory
 * external data (TensorProto.external_data's location) is relative to, or
 * NULL when the bytes come from no file (the fuzzer): a tensor with external
 * data is then an error, so nothing else is read.  defines bind symbolic
 * dimensions (-D N=8).  Returns false if any error was reported to d.
 * out_w may be NULL. */
bool mlc_onnx_import(mlc_program *p, mlc_diag *d, const char *name, const char *path, const uint8_t *buf, size_t len,
                     const mlc_define *defines, uint32_t ndefines, mlc_onnx_weights *out_w);

/* An ONNX tensor name as mlc's inputs and outputs spell it: every character
 * other than [A-Za-z0-9_] becomes '_', and a leading digit gets a 't'
 * before it ("onnx::Add_3" -> "onnx__Add_3", "1" -> "t1"). */
/* The same, for a graph that a .mdl file uses as a module (onnx("m.onnx")):
 * every message also points at `at`, the call in the .mdl source, and a
 * symbolic dimension is said to take the config value of its name. */
bool mlc_onnx_import_at(mlc_program *p, mlc_diag *d, mlc_loc at, const char *name, const char *path,
                        const uint8_t *buf, size_t len, const mlc_define *defines, uint32_t ndefines,
                        mlc_onnx_weights *out_w);

const char *mlc_onnx_c_name(mlc_arena *a, const char *s);

#endif
