/* SPV_NV_cooperative_matrix -> SPV_KHR_cooperative_matrix, word by word.
 *
 * The emitters write cooperative-matrix kernels in their NV form because the
 * validator Debian 12 ships (SPIRV-Tools 2023.1) predates the KHR extension:
 * each module is validated as NV, then rewritten here into the KHR form that
 * other vendors' drivers run.  The two forms match opcode for opcode except
 * for what KHR adds: a matrix type names its use (A, B or accumulator), and
 * loads and stores take a layout constant instead of a column-major bool.
 * The use of each NV type is inferred from data flow into and out of
 * OpCooperativeMatrixMulAddNV; a type used in two roles (mlc's 16 x 16 f16
 * type is both A and B) becomes two KHR types.  Anything the inference cannot
 * decide is an error, never a guess.
 *
 * Nothing can validate the KHR form here, so mlc_spirv_khr_check checks what
 * the translation is responsible for (khr_check.c).
 */
#ifndef MLC_CODEGEN_SPIRV_KHR_H
#define MLC_CODEGEN_SPIRV_KHR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The KHR numbers (SPIR-V 1.6 unified spirv.h); Debian 12's spirv-headers
 * 1.3.239 has only the NV ones. */
enum {
  MLC_SPV_CAP_COOPMAT_KHR = 6022,
  MLC_SPV_OP_TYPE_COOPMAT_KHR = 4456,
  MLC_SPV_OP_COOPMAT_LOAD_KHR = 4457,
  MLC_SPV_OP_COOPMAT_STORE_KHR = 4458,
  MLC_SPV_OP_COOPMAT_MULADD_KHR = 4459,
  MLC_SPV_OP_COOPMAT_LENGTH_KHR = 4460,
};
/* SPV_KHR_bfloat16: OpTypeFloat 16 with this FP encoding is bf16, and
 * these capabilities let cooperative matrices have it as their component. */
enum { MLC_SPV_FP_BFLOAT16 = 0, MLC_SPV_CAP_BFLOAT16_TYPE = 5116, MLC_SPV_CAP_BFLOAT16_COOPMAT = 5118 };
/* CooperativeMatrixUse and CooperativeMatrixLayout */
enum { MLC_COOPMAT_USE_A = 0, MLC_COOPMAT_USE_B = 1, MLC_COOPMAT_USE_ACC = 2 };
enum { MLC_COOPMAT_ROW_MAJOR = 0, MLC_COOPMAT_COLUMN_MAJOR = 1 };

/* Rewrites a valid NV module (words[n]) into its KHR form: *out (malloc'ed,
 * the caller frees) of *out_n words.  False with a message in err when the
 * module has something the translation does not handle or cannot infer. */
bool mlc_spirv_nv_to_khr(const uint32_t *words, size_t n, uint32_t **out, size_t *out_n, char *err, size_t errn);
/* The same for a module whose 16-bit A and B matrices hold bf16 bits
 * (emit_gemm.c's bf16 kernel, valid as NV only as f16): in the KHR form
 * their component is SPV_KHR_bfloat16's bf16 (a new OpTypeFloat 16
 * BFloat16KHR, with its capabilities and extension); an A or B matrix of
 * another component than the module's f16 is an error. */
bool mlc_spirv_nv_to_khr_bf16(const uint32_t *words, size_t n, uint32_t **out, size_t *out_n, char *err, size_t errn);

/* Structural checks of a KHR module (what spvValidate would be asked, as far
 * as the translation is concerned): a well-formed header and instruction
 * stream, every result id under the bound and defined once, ids defined
 * before use, no NV opcode, capability or extension left, KHR types whose
 * operands are constants (use 0..2) and whose component is a scalar type
 * (bf16 only with SPV_KHR_bfloat16's capabilities and extension), loads and
 * stores with a layout constant, and each MulAdd's A, B and C of the uses
 * and shapes its position asks for, A and B of one component.  False with
 * the first problem in err. */
bool mlc_spirv_khr_check(const uint32_t *words, size_t n, char *err, size_t errn);

#endif
