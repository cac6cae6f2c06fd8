/* Cooperative matrices: the multiplies a module does, read from its words,
 * against the device's list (coopmat.h).
 *
 * The scan keeps one slot per id (the module's bound): what each type,
 * constant and cooperative-matrix value is, as far as the multiplies need.
 * A value's matrix type is its result type, word 1 of the instruction that
 * defines it in word 2; types and constants come before every function, so
 * an instruction whose word 1 is a matrix type is always one that returns a
 * matrix (a type's own id is never word 1 of another instruction but an
 * annotation's, and annotations come before the types).
 */
#include "runtime/vulkan/coopmat.h"

#include <stdio.h>
#include <string.h>

enum { /* SPIR-V numbers (the KHR ones from the unified spirv.h: Debian 12's headers predate them) */
  OP_CAPABILITY = 17, OP_TYPE_INT = 21, OP_TYPE_FLOAT = 22, OP_CONSTANT = 43, OP_SPEC_CONSTANT = 50,
  OP_TYPE_COOPMAT_KHR = 4456, OP_MULADD_KHR = 4459, OP_TYPE_COOPMAT_NV = 5358, OP_MULADD_NV = 5361,
  CAP_COOPMAT_NV = 5357, SPV_MAGIC = 0x07230203, SCOPE_WORKGROUP = 2
};
enum { T_NONE, T_COMPONENT, T_CONST, T_SPEC, T_MAT, T_VALUE };
enum { MAX_MATS = 64 };

typedef struct {
  uint8_t tag;
  uint32_t v; /* T_COMPONENT: a VkComponentType; T_CONST: the value; T_MAT, T_VALUE: the matrix type's index */
} slot;

typedef struct {
  int32_t comp, scope;
  uint32_t rows, cols;
} mat;

static int32_t float_component(const uint32_t *w, uint32_t len) {
  uint32_t width = w[2];
  if (width == 16) return len > 3 && w[3] == 0 ? MLC_VK_COMPONENT_BF16 : MLC_VK_COMPONENT_F16; /* FP encoding BFloat16KHR */
  return width == 32 ? MLC_VK_COMPONENT_F32 : width == 64 ? 2 : -(int32_t)width;
}

static int32_t int_component(uint32_t width, uint32_t sign) {
  int lg = width == 8 ? 0 : width == 16 ? 1 : width == 32 ? 2 : width == 64 ? 3 : -1;
  if (lg < 0) return -1000 - (int32_t)width;
  return (sign ? 3 : 7) + lg; /* VK_COMPONENT_TYPE_SINT8_KHR = 3 .. UINT64_KHR = 10 */
}

/* The OpConstant value of id into *v, else a status. */
static mlc_status constant(const slot *s, uint32_t bound, uint32_t id, size_t at, const char *what, uint32_t *v) {
  if (id < bound && s[id].tag == T_CONST) {
    *v = s[id].v;
    return NULL;
  }
  if (id < bound && s[id].tag == T_SPEC)
    return mlc_status_make(MLC_INVALID_ARGUMENT, "cooperative-matrix type at word %zu: its %s is a specialisation constant, "
                           "which the runtime does not set", at, what);
  return mlc_status_make(MLC_INVALID_ARGUMENT, "cooperative-matrix type at word %zu: its %s is not an OpConstant", at, what);
}

mlc_status mlc_vk_coopmat_scan(mlc_allocator al, const uint32_t *w, size_t n, mlc_vk_coopmat_kind *out_kind,
                               mlc_vk_coopmat_use *out, uint32_t cap, uint32_t *out_n) {
  *out_n = 0;
  *out_kind = MLC_VK_COOPMAT_KHR;
  if (n < 5 || w[0] != SPV_MAGIC) return mlc_status_make(MLC_INVALID_ARGUMENT, "not a SPIR-V module");
  uint32_t bound = w[3];
  slot *s = mlc_allocator_alloc_array(al, bound, sizeof *s);
  if (!s) return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  memset(s, 0, (size_t)bound * sizeof *s);
  mat mats[MAX_MATS];
  uint32_t nmats = 0;
  mlc_status st = NULL;
  for (size_t i = 5; i < n && !st;) {
    uint32_t len = w[i] >> 16, op = w[i] & 0xffff;
    if (!len || i + len > n) {
      st = mlc_status_make(MLC_INVALID_ARGUMENT, "malformed SPIR-V: the instruction at word %zu runs past the end", i);
      break;
    }
    const uint32_t *x = w + i;
    if (op == OP_CAPABILITY && len > 1 && x[1] == CAP_COOPMAT_NV) *out_kind = MLC_VK_COOPMAT_NV;
    if (op == OP_TYPE_FLOAT && len > 2 && x[1] < bound) s[x[1]] = (slot){T_COMPONENT, (uint32_t)float_component(x, len)};
    if (op == OP_TYPE_INT && len > 3 && x[1] < bound) s[x[1]] = (slot){T_COMPONENT, (uint32_t)int_component(x[2], x[3])};
    if ((op == OP_CONSTANT || op == OP_SPEC_CONSTANT) && len > 3 && x[2] < bound)
      s[x[2]] = (slot){op == OP_CONSTANT ? T_CONST : T_SPEC, x[3]};
    if ((op == OP_TYPE_COOPMAT_NV && len == 6) || (op == OP_TYPE_COOPMAT_KHR && len == 7)) {
      mat m = {0};
      if (x[1] >= bound || x[2] >= bound || s[x[2]].tag != T_COMPONENT) {
        st = mlc_status_make(MLC_INVALID_ARGUMENT, "cooperative-matrix type at word %zu: its component is not a scalar type", i);
        break;
      }
      m.comp = (int32_t)s[x[2]].v;
      uint32_t scope = 0;
      if ((st = constant(s, bound, x[3], i, "scope", &scope)) || (st = constant(s, bound, x[4], i, "row count", &m.rows)) ||
          (st = constant(s, bound, x[5], i, "column count", &m.cols)))
        break;
      m.scope = (int32_t)scope;
      if (nmats == MAX_MATS) {
        st = mlc_status_make(MLC_INVALID_ARGUMENT, "more than %d cooperative-matrix types", MAX_MATS);
        break;
      }
      mats[nmats] = m;
      s[x[1]] = (slot){T_MAT, nmats++};
    } else if (op == OP_MULADD_NV || op == OP_MULADD_KHR) {
      const mat *m[4] = {0}; /* result, A, B, C */
      for (int k = 0; k < 4 && len > 5; k++) {
        uint32_t id = k ? x[2 + k] : x[1];
        if (id < bound && s[id].tag == (k ? T_VALUE : T_MAT)) m[k] = &mats[s[id].v];
      }
      if (!m[0] || !m[1] || !m[2] || !m[3]) {
        st = mlc_status_make(MLC_INVALID_ARGUMENT, "cooperative-matrix multiply at word %zu: an operand of no cooperative-matrix type", i);
        break;
      }
      mlc_vk_coopmat_use u = {.m = m[1]->rows, .k = m[1]->cols, .n = m[2]->cols, .a = m[1]->comp, .b = m[2]->comp,
                              .c = m[3]->comp, .r = m[0]->comp, .scope = m[1]->scope};
      if (m[2]->rows != u.k || m[3]->rows != u.m || m[3]->cols != u.n || m[0]->rows != u.m || m[0]->cols != u.n ||
          m[2]->scope != u.scope || m[3]->scope != u.scope || m[0]->scope != u.scope) {
        st = mlc_status_make(MLC_INVALID_ARGUMENT, "cooperative-matrix multiply at word %zu: its operands' shapes or scopes disagree", i);
        break;
      }
      bool seen = false;
      for (uint32_t j = 0; j < *out_n && !seen; j++) seen = !memcmp(&out[j], &u, sizeof u);
      if (!seen && *out_n == cap) {
        st = mlc_status_make(MLC_INVALID_ARGUMENT, "more than %u kinds of cooperative-matrix multiply", cap);
        break;
      }
      if (!seen) out[(*out_n)++] = u;
    }
    if (op != OP_TYPE_COOPMAT_NV && op != OP_TYPE_COOPMAT_KHR && len > 2 && x[1] < bound && s[x[1]].tag == T_MAT &&
        x[2] < bound)
      s[x[2]] = (slot){T_VALUE, s[x[1]].v};
    i += len;
  }
  mlc_allocator_free(al, s);
  if (st) *out_n = 0;
  return st;
}

bool mlc_vk_coopmat_offered(const mlc_vk_coopmat_use *u, const mlc_vk_coopmat_properties *p, uint32_t np) {
  for (uint32_t i = 0; i < np; i++)
    if (p[i].MSize == u->m && p[i].NSize == u->n && p[i].KSize == u->k && p[i].AType == u->a && p[i].BType == u->b &&
        p[i].CType == u->c && p[i].ResultType == u->r && p[i].scope == u->scope)
      return true;
  return false;
}

static const char *component_name(int32_t c, char tmp[16]) {
  static const char *names[] = {"f16", "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"};
  if (c >= 0 && c <= 10) return names[c];
  if (c == MLC_VK_COMPONENT_BF16) return "bf16";
  snprintf(tmp, 16, "type %d", (int)c);
  return tmp;
}

static const char *scope_name(int32_t scope) {
  return scope == MLC_VK_SCOPE_SUBGROUP ? "" : scope == SCOPE_WORKGROUP ? ", workgroup scope" : ", other scope";
}

void mlc_vk_coopmat_use_name(const mlc_vk_coopmat_use *u, char *buf, size_t n) {
  char t[4][16];
  snprintf(buf, n, "%ux%ux%u %s x %s + %s -> %s%s", u->m, u->n, u->k, component_name(u->a, t[0]), component_name(u->b, t[1]),
           component_name(u->c, t[2]), component_name(u->r, t[3]), scope_name(u->scope));
}

void mlc_vk_coopmat_list(const mlc_vk_coopmat_properties *p, uint32_t np, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = 0;
  for (uint32_t i = 0; i < np && len + 1 < n; i++) {
    char t[4][16], one[128];
    const char *a = component_name(p[i].AType, t[0]), *c = component_name(p[i].CType, t[2]);
    if (p[i].AType == p[i].BType && p[i].CType == p[i].ResultType)
      snprintf(one, sizeof one, "%ux%ux%u %s->%s%s", p[i].MSize, p[i].NSize, p[i].KSize, a, c, scope_name(p[i].scope));
    else
      snprintf(one, sizeof one, "%ux%ux%u %s x %s + %s -> %s%s", p[i].MSize, p[i].NSize, p[i].KSize, a,
               component_name(p[i].BType, t[1]), c, component_name(p[i].ResultType, t[3]), scope_name(p[i].scope));
    int wr = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", one);
    if (wr < 0) break;
    len += (size_t)wr < n - len ? (size_t)wr : n - len - 1;
  }
  if (!np) snprintf(buf, n, "none");
}

static const char *ext_name(mlc_vk_coopmat_kind kind) {
  return kind == MLC_VK_COOPMAT_NV ? MLC_VK_COOPMAT_NV_EXT : MLC_VK_COOPMAT_EXT;
}

/* NULL when the device runs every multiply of k, else why not (in why). */
static mlc_status runs(mlc_allocator al, const mlc_vk_coopmat_caps *caps, const mlc_vk_kernel *k, bool *ok, char *why, size_t n) {
  mlc_vk_coopmat_use u[8];
  uint32_t nu;
  mlc_vk_coopmat_kind kind;
  *ok = false;
  mlc_status st = mlc_vk_coopmat_scan(al, k->words, k->nwords, &kind, u, 8, &nu);
  if (st) return mlc_status_annotate(st, "Vulkan kernel %s", k->symbol);
  if (!caps->enabled[kind]) {
    snprintf(why, n, "cooperative matrices through %s, which %s does not have", ext_name(kind), caps->device);
    return NULL;
  }
  for (uint32_t j = 0; j < nu; j++)
    if (!mlc_vk_coopmat_offered(&u[j], caps->props[kind], caps->nprops[kind])) {
      char name[128], list[512];
      mlc_vk_coopmat_use_name(&u[j], name, sizeof name);
      mlc_vk_coopmat_list(caps->props[kind], caps->nprops[kind], list, sizeof list);
      snprintf(why, n, "%s cooperative matrices (%s), which %s does not offer (it offers: %s)", name,
               kind == MLC_VK_COOPMAT_NV ? "NV" : "KHR", caps->device, list);
      return NULL;
    }
  *ok = true;
  return NULL;
}

mlc_status mlc_vk_coopmat_pick(mlc_allocator al, const mlc_vk_coopmat_caps *caps, const mlc_vk_kernel *kernels, uint32_t nk,
                               uint32_t i, uint32_t *out) {
  char why[1024] = "";
  uint32_t at = i;
  for (uint32_t hops = 0; hops <= nk; hops++) {
    const mlc_vk_kernel *k = &kernels[at];
    bool ok = !k->coopmat;
    if (!ok) MLC_RETURN_IF_ERROR(runs(al, caps, k, &ok, why, sizeof why));
    if (ok) {
      *out = at;
      return NULL;
    }
    if (k->fallback >= nk && at == i)
      return mlc_status_make(MLC_UNIMPLEMENTED, "Vulkan kernel %s uses %s, and has no fallback", k->symbol, why);
    if (k->fallback >= nk)
      return mlc_status_make(MLC_UNIMPLEMENTED, "Vulkan kernel %s: the last of its fallbacks, %s, uses %s, and has none",
                             kernels[i].symbol, k->symbol, why);
    at = k->fallback;
  }
  return mlc_status_make(MLC_INVALID_ARGUMENT, "Vulkan kernel %s: its fallbacks form a cycle", kernels[i].symbol);
}
