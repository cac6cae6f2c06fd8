/* The fp8 pass's graph (issue 30), checked on the IR after the whole
 * pipeline, with no code generated (the GPU numerics are tests/ref/fp8.py
 * --target cuda's):
 *   - on CUDA (target quant_both) every tensor that the FP8 GEMMs read in
 *     both layouts is quantised once into both: a quant_both read only by
 *     two views, its codes [r, c] at 0 and their transpose [c, r] at r c,
 *     and no f8 tensor is transposed by a kernel of its own;
 *   - on CUDA the amaxes of 16-bit tensors are maxes of |x| that give f32
 *     themselves (fuse.c's fold_abs and fold_amax_cast): no cast reads a max;
 *   - on the CPU (no quant_both) the transposed layouts are transposes of
 *     the quant, as before;
 *   - a max of |x| and a max of x do not hash alike (ir/hash.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "passes/passes.h"
#include "tests/unit/compiled.h"

static const mlc_define small[6] = {{"vocab", "512"}, {"dim", "128"}, {"layers", "2"}, {"heads", "4"}, {"batch", "2"}, {"seq", "64"}};

/* The seed's MiniLLM, small, bf16, --matmul=fp8, through the pipeline for target: its train function. */
static mlc_func *compile_fp8(compiled *c, const char *target) {
  const char *src = compiled_read(MLC_SOURCE_DIR "/examples/minillm.mdl");
  assert_non_null(src);
  mlc_pipeline_options po = {.target = target};
  bool ok = compiled_frontend(c, src, small, 6);
  c->prog.opts.matmul = MLC_MATMUL_FP8;
  ok = ok && mlc_pipeline_run(&c->prog, &c->diag, &po);
  fflush(c->errf);
  if (!ok) fail_msg("%s: %s", target, c->err);
  mlc_func *f = compiled_func(&c->prog, "train");
  assert_non_null(f);
  return f;
}

static uint32_t count(const mlc_func *f, mlc_op op) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < f->n; i++) n += f->nodes[i].op == op;
  return n;
}

/* Transposes whose input is an f8 tensor. */
static uint32_t f8_transposes(const mlc_func *f) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < f->n; i++)
    n += f->nodes[i].op == MLC_OP_TRANSPOSE && mlc_dtype_is_f8(f->nodes[f->nodes[i].in[0]].type.dtype);
  return n;
}

static void test_cuda_quant_both(void **state) {
  (void)state;
  compiled c;
  const mlc_func *f = compile_fp8(&c, "cuda");
  uint32_t nq = count(f, MLC_OP_QUANT_BOTH);
  /* per layer: x, w and g of each of its four linears (the head stays bf16) */
  assert_int_equal(nq, 2 * 4 * 3);
  assert_int_equal(count(f, MLC_OP_QUANT), 0);
  assert_int_equal(f8_transposes(f), 0);
  for (uint32_t i = 0; i < f->n; i++) {
    const mlc_node *q = &f->nodes[i];
    if (q->op != MLC_OP_QUANT_BOTH) continue;
    const mlc_type *x = &f->nodes[q->in[0]].type;
    assert_int_equal(x->rank, 2);
    int64_t r = x->dim[0], cols = x->dim[1];
    assert_int_equal(q->type.rank, 1);
    assert_int_equal(q->type.dim[0], 2 * r * cols);
    uint32_t readers = 0, lo = 0, hi = 0;
    for (uint32_t j = i + 1; j < f->n; j++)
      for (uint32_t k = 0; k < f->nodes[j].nin; k++) {
        if (f->nodes[j].in[k] != i) continue;
        const mlc_node *v = &f->nodes[j];
        readers++;
        assert_int_equal(v->op, MLC_OP_VIEW);
        assert_int_equal(v->type.rank, 2);
        if (v->a.start == 0) {
          lo++;
          assert_true(v->type.dim[0] == r && v->type.dim[1] == cols);
        } else {
          hi++;
          assert_true(v->a.start == r * cols && v->type.dim[0] == cols && v->type.dim[1] == r);
        }
      }
    assert_int_equal(readers, 2);
    assert_true(lo == 1 && hi == 1);
  }
  release(&c);
}

static void test_cuda_amax_f32(void **state) {
  (void)state;
  compiled c;
  const mlc_func *f = compile_fp8(&c, "cuda");
  uint32_t amaxes = 0;
  for (uint32_t i = 0; i < f->n; i++) {
    const mlc_node *n = &f->nodes[i];
    if (n->op == MLC_OP_CAST) assert_int_not_equal(f->nodes[n->in[0]].op, MLC_OP_MAX);
    if (n->op != MLC_OP_MAX || !n->a.abs_in) continue;
    amaxes++;
    assert_int_equal(n->type.dtype, MLC_DT_F32);
    assert_int_equal(n->type.rank, 0);
  }
  assert_int_equal(amaxes, 2 * 4 * 3); /* one per quantised tensor */
  /* at least one of them reads a 16-bit tensor (the compute dtype is bf16): the folded cast */
  bool narrow = false;
  for (uint32_t i = 0; i < f->n; i++)
    if (f->nodes[i].op == MLC_OP_MAX && f->nodes[i].a.abs_in)
      narrow |= mlc_dtype_size((mlc_dtype)f->nodes[f->nodes[i].in[0]].type.dtype) == 2;
  assert_true(narrow);
  release(&c);
}

static void test_cpu_transposes(void **state) {
  (void)state;
  compiled c;
  const mlc_func *f = compile_fp8(&c, "cpu");
  assert_int_equal(count(f, MLC_OP_QUANT_BOTH), 0);
  assert_int_equal(count(f, MLC_OP_QUANT), 2 * 4 * 3);
  assert_int_equal(f8_transposes(f), 2 * 4 * 3);
  release(&c);
}

static void test_abs_in_hashes_apart(void **state) {
  (void)state;
  compiled c;
  mlc_func *f = compile_fp8(&c, "cuda");
  for (uint32_t i = 0; i < f->n; i++) {
    mlc_node *n = &f->nodes[i];
    if (n->op != MLC_OP_MAX || !n->a.abs_in) continue;
    uint64_t with = mlc_hash_nodes(&c.prog, f, &i, 1);
    n->a.abs_in = 0;
    uint64_t without = mlc_hash_nodes(&c.prog, f, &i, 1);
    n->a.abs_in = 1;
    assert_true(with != without);
    break;
  }
  release(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cuda_quant_both),
      cmocka_unit_test(test_cuda_amax_f32),
      cmocka_unit_test(test_cpu_transposes),
      cmocka_unit_test(test_abs_in_hashes_apart),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
