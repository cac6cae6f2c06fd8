/* The .mdl lexer.
 *
 * Tokens carry their position and whether they start a line: statements are
 * not terminated by anything, and the parser uses `bol` to tell where one
 * ends (an expression never continues onto a new line outside brackets).
 * Comments run from '#' to the end of the line.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

static const char *keywords[] = {
  "config", "module", "forward", "return", "param", "repeat", "for", "in", "train", "input", "true", "false",
};

bool mlc_tok_is(const mlc_token *t, const char *s) {
  return (t->kind == TK_PUNCT || t->kind == TK_KEYWORD || t->kind == TK_IDENT) && strlen(s) == t->len &&
         !memcmp(t->s, s, t->len);
}

static bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

#define MAX_TOKENS (1u << 24)

mlc_token *mlc_lex(mlc_arena *a, mlc_diag *d, uint32_t file, const char *src, size_t len, uint32_t *out_n) {
  uint32_t n = 0, cap = 1024;
  mlc_token *toks = mlc_arena_alloc(a, cap * sizeof *toks);
  const char *p = src, *end = src + len, *line_start = src;
  uint32_t line = 1;
  bool bol = true;
  /* Text never contains a NUL byte: this is a binary file, and one error
   * says so better than one per run of garbage. */
  const char *nul = memchr(src, 0, len);
  if (nul) {
    for (; p < nul; p++)
      if (*p == '\n') { line++; line_start = p + 1; }
    mlc_error(d, (mlc_loc){file, line, (uint32_t)(nul - line_start) + 1},
              "unexpected byte 0x00: this looks like a binary file, not a model description");
    p = end;
  }
  while (p < end) {
    char c = *p;
    if (c == '\n') { p++; line++; line_start = p; bol = true; continue; }
    if (c == ' ' || c == '\t' || c == '\r') { p++; continue; }
    if (c == '#') { while (p < end && *p != '\n') p++; continue; }
    mlc_token t = {.s = p, .bol = bol, .loc = {file, line, (uint32_t)(p - line_start) + 1}};
    if (is_ident_start(c)) {
      while (p < end && (is_ident_start(*p) || is_digit(*p))) p++;
      t.kind = TK_IDENT;
      t.len = (uint32_t)(p - t.s);
      for (size_t k = 0; k < sizeof keywords / sizeof *keywords; k++)
        if (strlen(keywords[k]) == t.len && !memcmp(keywords[k], t.s, t.len)) t.kind = TK_KEYWORD;
    } else if (is_digit(c) || (c == '.' && p + 1 < end && is_digit(p[1]))) {
      bool is_float = false;
      while (p < end && is_digit(*p)) p++;
      if (p < end && *p == '.') { is_float = true; p++; while (p < end && is_digit(*p)) p++; }
      if (p < end && (*p == 'e' || *p == 'E')) {
        const char *q = p + 1;
        if (q < end && (*q == '+' || *q == '-')) q++;
        if (q < end && is_digit(*q)) {
          is_float = true;
          p = q;
          while (p < end && is_digit(*p)) p++;
        }
      }
      t.len = (uint32_t)(p - t.s);
      if (p < end && (is_ident_start(*p))) {
        mlc_error(d, (mlc_loc){file, line, (uint32_t)(p - line_start) + 1}, "invalid suffix '%c' on number", *p);
        while (p < end && (is_ident_start(*p) || is_digit(*p))) p++;
      }
      char buf[64];
      if (t.len >= sizeof buf) {
        mlc_error(d, t.loc, "number literal is too long (the limit is %d characters)", (int)sizeof buf - 1);
        continue;
      }
      memcpy(buf, t.s, t.len);
      buf[t.len] = 0;
      errno = 0;
      if (is_float) {
        t.kind = TK_FLOAT;
        t.fval = strtod(buf, NULL);
        if (errno == ERANGE) mlc_error(d, t.loc, "floating-point literal '%s' is out of range", buf);
      } else {
        t.kind = TK_INT;
        t.ival = strtoll(buf, NULL, 10);
        if (errno == ERANGE) mlc_error(d, t.loc, "integer literal '%s' is too large (the limit is 2^63-1)", buf);
        t.fval = (double)t.ival;
      }
    } else if (p + 1 < end && (!memcmp(p, "<=", 2) || !memcmp(p, ">=", 2) || !memcmp(p, "==", 2) ||
                               !memcmp(p, "!=", 2) || !memcmp(p, "**", 2))) {
      t.kind = TK_PUNCT;
      t.len = 2;
      p += 2;
    } else if (c == '"') { /* a string: no escapes, one line */
      const char *q = p + 1;
      while (q < end && *q != '"' && *q != '\n') q++;
      if (q == end || *q != '"') {
        mlc_error(d, t.loc, "unterminated string");
        p = q;
        continue;
      }
      t.kind = TK_STRING;
      t.s = p + 1;
      t.len = (uint32_t)(q - p - 1);
      p = q + 1;
    } else if (strchr("{}()[],:=+-*/@.<>", c) && c) {
      t.kind = TK_PUNCT;
      t.len = 1;
      p++;
    } else {
      unsigned char uc = (unsigned char)c;
      if (uc >= 32 && uc < 127) mlc_error(d, t.loc, "unexpected character '%c'", c);
      else if (uc >= 128) mlc_error(d, t.loc, "unexpected non-ASCII byte 0x%02x (only comments may contain non-ASCII text)", uc);
      else mlc_error(d, t.loc, "unexpected control character 0x%02x (is this a text file?)", uc);
      /* Skip a whole run of bad bytes: binary input gives one error, not thousands. */
      p++;
      while (p < end && *p != '\n' && ((unsigned char)*p < 32 || (unsigned char)*p >= 127) && *p != '\t' && *p != '\r') p++;
      if (d->errors > MLC_MAX_ERRORS) break;
      continue;
    }
    bol = false;
    if (n + 1 >= cap) {
      if (cap >= MAX_TOKENS) { mlc_error(d, t.loc, "file has too many tokens"); break; }
      toks = mlc_arena_grow(a, toks, n * sizeof *toks, cap * 2 * sizeof *toks);
      cap *= 2;
    }
    toks[n++] = t;
  }
  toks[n] = (mlc_token){.kind = TK_EOF, .bol = true, .s = end, .loc = {file, line, (uint32_t)(end - line_start) + 1}};
  *out_n = n + 1;
  return toks;
}
