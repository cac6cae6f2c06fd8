/* Nsight Compute's CSV, its verdicts and the comparison: see ncu.h. */
#include "runtime/ncu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAXCOLS = 4096 }; /* ncu 2025's raw page has 285 columns (device attributes, launch statistics) */

/* Splits one CSV record at *p (quoted fields, "" inside quotes) into
 * fields, NUL-terminated in place; advances *p past the line.  Returns the
 * number of fields. */
static int split(char **p, char **fields, int max) {
  char *s = *p, *w = s;
  int n = 0;
  if (!*s) return 0;
  for (;;) {
    char *start = w;
    if (*s == '"') {
      s++;
      for (;;) {
        if (!*s) break;
        if (*s == '"' && s[1] == '"') { *w++ = '"'; s += 2; continue; }
        if (*s == '"') { s++; break; }
        *w++ = *s++;
      }
    }
    while (*s && *s != ',' && *s != '\n' && *s != '\r') *w++ = *s++;
    char end = *s;
    *w++ = 0;
    if (n < max) fields[n++] = start;
    if (end == ',') { s++; continue; }
    while (*s == '\r' || *s == '\n') { s++; if (s[-1] == '\n') break; }
    break;
  }
  *p = s;
  return n;
}

/* A number as ncu prints it: "1,234.5" -> 1234.5; NAN if none. */
static double number(const char *s) {
  char buf[64];
  size_t k = 0;
  for (; *s && k + 1 < sizeof buf; s++)
    if (*s != ',' && *s != ' ') buf[k++] = *s;
  buf[k] = 0;
  char *end;
  double v = strtod(buf, &end);
  return k && !*end ? v : NAN;
}

/* Seconds per unit of a duration ("nsecond", "usecond", "msecond", "second", "ns", "us", "ms"). */
static double time_unit(const char *u) {
  if (!u || !*u) return 1e-9; /* ncu's default for gpu__time_duration */
  if (u[0] == 'n') return 1e-9;
  if (u[0] == 'u' || !strncmp(u, "\xc2\xb5", 2)) return 1e-6;
  if (u[0] == 'm') return 1e-3;
  return 1;
}

/* MHz per unit of a frequency ("cycle/nsecond", "cycle/usecond", "Ghz", "Mhz", "cycle/second", "hz"). */
static double freq_unit(const char *u) {
  if (!u || !*u) return 1e-6;
  if (strstr(u, "nsecond") || u[0] == 'G' || u[0] == 'g') return 1e3;
  if (strstr(u, "usecond") || u[0] == 'M') return 1;
  if (strstr(u, "msecond") || u[0] == 'K' || u[0] == 'k') return 1e-3;
  return 1e-6;
}

/* Bytes per unit of a size ("byte", "Kbyte", "Mbyte", "Gbyte"; ncu's are powers of 1000). */
static double byte_unit(const char *u) {
  if (!u || !*u) return 1;
  return u[0] == 'K' || u[0] == 'k' ? 1e3 : u[0] == 'M' ? 1e6 : u[0] == 'G' ? 1e9 : u[0] == 'T' ? 1e12 : 1;
}

static int column(char **names, int n, const char *want) {
  for (int i = 0; i < n; i++)
    if (!strcmp(names[i], want)) return i;
  return -1;
}

static void set_kernel(mlc_ncu_row *r, const char *name) {
  size_t len = strcspn(name, "(");
  while (len > 0 && name[len - 1] == ' ') len--;
  snprintf(r->kernel, sizeof r->kernel, "%.*s", (int)len, name);
}

static mlc_ncu_row *grow(mlc_ncu_table *t, uint32_t *cap) {
  if (t->n == *cap) {
    uint32_t c = *cap ? *cap * 2 : 64;
    mlc_ncu_row *r = realloc(t->rows, c * sizeof *r);
    if (!r) return NULL;
    t->rows = r, *cap = c;
  }
  mlc_ncu_row *r = &t->rows[t->n++];
  memset(r, 0, sizeof *r);
  r->sm_pct = r->mem_pct = r->dram_pct = r->bytes = -1;
  return r;
}

static void set_metric(mlc_ncu_row *r, const char *metric, const char *unit, double v) {
  if (isnan(v)) return;
  if (!strcmp(metric, MLC_NCU_SM)) r->sm_pct = v;
  else if (!strcmp(metric, MLC_NCU_MEM)) r->mem_pct = v;
  else if (!strcmp(metric, MLC_NCU_DRAM)) r->dram_pct = v;
  else if (!strcmp(metric, MLC_NCU_TIME)) r->seconds = v * time_unit(unit);
  else if (!strcmp(metric, MLC_NCU_CLOCK)) r->mhz = v * freq_unit(unit);
  else if (!strcmp(metric, MLC_NCU_BYTES)) r->bytes = v * byte_unit(unit);
}

mlc_status mlc_ncu_parse_csv(const char *text, mlc_ncu_table *out) {
  memset(out, 0, sizeof *out);
  char *copy = strdup(text), *p = copy;
  char **hdr = calloc(3 * MAXCOLS, sizeof *hdr), **f = hdr + MAXCOLS, **units = hdr + 2 * MAXCOLS;
  if (!copy || !hdr) {
    free(copy);
    free(hdr);
    return mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory");
  }
  int nh = 0;
  while (*p) { /* the header: the first line naming "Kernel Name" (before it: ncu's chatter, the program's output) */
    size_t len = strcspn(p, "\n");
    char *k = strstr(p, "\"Kernel Name\"");
    if (!k || k >= p + len) { p += len; p += *p == '\n'; continue; }
    nh = split(&p, hdr, MAXCOLS);
    break;
  }
  int kcol = column(hdr, nh, "Kernel Name"), idcol = column(hdr, nh, "ID");
  int mname = column(hdr, nh, "Metric Name"), munit = column(hdr, nh, "Metric Unit"), mval = column(hdr, nh, "Metric Value");
  mlc_status st = NULL;
  if (kcol < 0) {
    st = mlc_status_make(MLC_INVALID_ARGUMENT, "ncu CSV: no header with a \"Kernel Name\" column (expected `ncu --csv --page raw`)");
    goto out;
  }
  bool details = mname >= 0 && mval >= 0;
  uint32_t cap = 0;
  long last_id = -1;
  while (*p) {
    if (!strncmp(p, "==", 2)) { p += strcspn(p, "\n"); p += *p == '\n'; continue; }
    int n = split(&p, f, MAXCOLS);
    if (n <= kcol) continue;
    if (!details && (idcol < 0 ? !*f[kcol] : !*f[idcol])) { /* the units row */
      for (int i = 0; i < n && i < nh; i++) units[i] = f[i];
      continue;
    }
    mlc_ncu_row *r;
    if (details) {
      long id = idcol >= 0 ? strtol(f[idcol], NULL, 10) : -2;
      if (n <= mval || n <= mname) continue;
      if (out->n && id == last_id && id != -2) r = &out->rows[out->n - 1]; /* the same launch's next metric */
      else if (!(r = grow(out, &cap))) { st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory"); goto out; }
      else set_kernel(r, f[kcol]);
      last_id = id;
      set_metric(r, f[mname], munit >= 0 && munit < n ? f[munit] : "", number(f[mval]));
      continue;
    }
    if (!(r = grow(out, &cap))) { st = mlc_status_make(MLC_OUT_OF_MEMORY, "out of memory"); goto out; }
    set_kernel(r, f[kcol]);
    for (int i = 0; i < n && i < nh; i++) set_metric(r, hdr[i], units[i], number(f[i]));
  }
  for (uint32_t i = 0; i < out->n && !st; i++)
    if (out->rows[i].sm_pct < 0 || out->rows[i].mem_pct < 0)
      st = mlc_status_make(MLC_INVALID_ARGUMENT, "ncu CSV: kernel %s has no %s", out->rows[i].kernel,
                           out->rows[i].sm_pct < 0 ? MLC_NCU_SM : MLC_NCU_MEM);
out:
  free(copy);
  free(hdr);
  if (st) mlc_ncu_table_free(out);
  return st;
}

void mlc_ncu_table_free(mlc_ncu_table *t) {
  free(t->rows);
  t->rows = NULL;
  t->n = 0;
}

mlc_bound mlc_ncu_verdict(double sm, double hbm) { return mlc_bound_rule(sm, hbm); }

bool mlc_ncu_symbol(const char *kernel, char *buf, size_t n) {
  size_t len = strlen(kernel), d = len;
  while (d > 0 && kernel[d - 1] >= '0' && kernel[d - 1] <= '9') d--;
  if (strncmp(kernel, "mlc_", 4) || d == len || d < 2 || kernel[d - 1] != '_' || d - 1 >= n) return false;
  snprintf(buf, n, "%.*s", (int)(d - 1), kernel);
  return true;
}

uint32_t mlc_ncu_compare(const mlc_ncu_table *t, mlc_ncu_match *m, uint32_t n, double *agree_out) {
  uint32_t compared = 0, agreed = 0;
  for (uint32_t i = 0; i < n; i++) {
    double w = 0, sm = 0, mem = 0, dram = 0, clk = 0, clk_w = 0, bytes = 0;
    bool has_dram = true, has_bytes = true;
    m[i].launches = 0;
    for (uint32_t j = 0; j < t->n; j++) {
      char sym[160];
      if (!mlc_ncu_symbol(t->rows[j].kernel, sym, sizeof sym) || strcmp(sym, m[i].symbol)) continue;
      const mlc_ncu_row *r = &t->rows[j];
      double wj = r->seconds > 0 ? r->seconds : 1e-6; /* no duration: equal weights */
      w += wj, sm += wj * r->sm_pct, mem += wj * r->mem_pct;
      if (r->dram_pct >= 0) dram += wj * r->dram_pct;
      else has_dram = false;
      if (r->mhz > 0) clk += wj * r->mhz, clk_w += wj;
      if (r->bytes >= 0) bytes += r->bytes;
      else has_bytes = false;
      m[i].launches++;
    }
    if (!m[i].launches) continue;
    m[i].sm_pct = sm / w, m[i].mem_pct = mem / w, m[i].dram_pct = has_dram ? dram / w : -1;
    m[i].ncu_mhz = clk_w > 0 ? clk / clk_w : 0;
    m[i].ncu_bytes = has_bytes ? bytes / m[i].launches * (m[i].nlaunch ? m[i].nlaunch : 1) : -1;
    m[i].ncu = mlc_ncu_verdict(m[i].sm_pct, m[i].dram_pct >= 0 ? m[i].dram_pct : m[i].mem_pct);
    m[i].agree = m[i].ncu == m[i].mlc;
    compared++, agreed += m[i].agree;
  }
  *agree_out = compared ? (double)agreed / compared : 0;
  return compared;
}

void mlc_ncu_print(const mlc_ncu_match *m, uint32_t n, FILE *out) {
  fprintf(out, "ncu beside mlc (ncu: memory when DRAM > %.0f%% and SM < %.0f%%, compute when SM > %.0f%% and DRAM < %.0f%%, "
               "else latency; mlc's verdict is the same rule on its own estimates, Comp %% and HBM %%, over all of a "
               "kernel's steps; MHz: ncu's SM clock; B/plan: the DRAM bytes ncu saw a call move over the bytes the plan "
               "counts, and mlc's estimate of that share, est, which its HBM %% is of)\n", MLC_RULE_HIGH_PCT, MLC_RULE_MEMORY_SM_PCT, MLC_RULE_HIGH_PCT, MLC_RULE_COMPUTE_MEM_PCT);
  fprintf(out, "%-24s %-32s %-8s %7s %7s %7s %5s | %7s %7s %7s %5s %6s %-8s %s\n", "Step", "Kernel", "mlc", "% roof",
          "Comp %", "HBM %", "est", "SM %", "Mem %", "DRAM %", "MHz", "B/plan", "ncu", "");
  uint32_t compared = 0, agreed = 0;
  for (uint32_t i = 0; i < n; i++) {
    char nmhz[16] = "-", dram[16] = "-", share[16] = "-", est[16] = "-";
    if (m[i].mlc_bytes > 0) snprintf(est, sizeof est, "%.2f", m[i].mlc_dram / m[i].mlc_bytes);
    if (m[i].ncu_bytes >= 0 && m[i].mlc_bytes > 0) snprintf(share, sizeof share, "%.2f", m[i].ncu_bytes / m[i].mlc_bytes);
    if (m[i].ncu_mhz > 0) snprintf(nmhz, sizeof nmhz, "%.0f", m[i].ncu_mhz);
    if (m[i].dram_pct >= 0) snprintf(dram, sizeof dram, "%.1f", m[i].dram_pct);
    fprintf(out, "%-24.24s %-32.32s %-8s %6.1f%% %7.1f %7.1f %5s | ", m[i].label, m[i].symbol, mlc_bound_name(m[i].mlc),
            m[i].mlc_pct, m[i].mlc_compute, m[i].mlc_memory, est);
    if (!m[i].launches) {
      fprintf(out, "%7s %7s %7s %5s %6s %-8s %s\n", "-", "-", "-", "-", "-", "-", "(not profiled by ncu)");
      continue;
    }
    fprintf(out, "%7.1f %7.1f %7s %5s %6s %-8s %s\n", m[i].sm_pct, m[i].mem_pct, dram, nmhz, share, mlc_bound_name(m[i].ncu),
            m[i].agree ? "" : "<- DISAGREE");
    compared++, agreed += m[i].agree;
  }
  fprintf(out, "agreement: %u of %u kernels (%.1f%%)\n", agreed, compared, compared ? 100.0 * agreed / compared : 0);
}

void mlc_ncu_write_json(const mlc_ncu_match *m, uint32_t n, const char *device, FILE *out) {
  uint32_t compared = 0, agreed = 0;
  for (uint32_t i = 0; i < n; i++)
    if (m[i].launches) compared++, agreed += m[i].agree;
  fprintf(out, "{\"device\": ");
  mlc_profile_json_string(out, device);
  fprintf(out, ", \"agreement\": %.6g, \"compared\": %u, \"agreed\": %u, \"kernels\": [", compared ? (double)agreed / compared : 0,
          compared, agreed);
  for (uint32_t i = 0, k = 0; i < n; i++) {
    fprintf(out, "%s\n  {\"step\": ", k++ ? "," : "");
    mlc_profile_json_string(out, m[i].label);
    fprintf(out, ", \"kernel\": ");
    mlc_profile_json_string(out, m[i].symbol);
    fprintf(out, ", \"mlc\": \"%s\", \"mlc_pct_roof\": %.4g, \"mlc_compute_pct\": %.4g, \"mlc_hbm_pct\": %.4g, "
            "\"mlc_bytes\": %.6g, \"mlc_dram_bytes\": %.6g", mlc_bound_name(m[i].mlc), m[i].mlc_pct, m[i].mlc_compute,
            m[i].mlc_memory, m[i].mlc_bytes, m[i].mlc_dram);
    if (m[i].launches)
      fprintf(out, ", \"ncu\": \"%s\", \"sm_pct\": %.4g, \"mem_pct\": %.4g, \"dram_pct\": %.4g, \"ncu_mhz\": %.4g, "
              "\"ncu_bytes\": %.6g, \"launches\": %u, \"agree\": %s", mlc_bound_name(m[i].ncu), m[i].sm_pct, m[i].mem_pct,
              m[i].dram_pct, m[i].ncu_mhz, m[i].ncu_bytes, m[i].launches, m[i].agree ? "true" : "false");
    else fprintf(out, ", \"ncu\": null");
    fputc('}', out);
  }
  fprintf(out, "\n]}\n");
}
