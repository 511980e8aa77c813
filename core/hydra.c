/*
 * hydra.c - Hydra's override grammar (hydra-core 1.3, OverrideLexer.g4 and
 * OverrideParser.g4 at v1.3.2), read and rewritten in C: a two-mode lexer
 * with ANTLR's token choice (the longest match; on a tie the rule written
 * first), then a recursive-descent parser over the tokens.  See hydra.h.
 */
#include "hydra.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Token types, in the value mode's rule order (the order breaks ties). */
enum {
    T_EOF,
    /* key (default) mode */
    T_EQUAL, T_TILDE, T_PLUS, T_AT, T_COLON, T_SLASH, T_ID, T_KEY_SPECIAL, T_DOT_PATH,
    /* value mode (T_COLON, T_EQUAL and T_ID shared) */
    T_POPEN, T_COMMA, T_PCLOSE, T_BRACKET_OPEN, T_BRACKET_CLOSE, T_BRACE_OPEN,
    T_BRACE_CLOSE, T_FLOAT, T_INT, T_BOOL, T_NULL, T_UNQUOTED_CHAR, T_ESC, T_WS,
    T_QUOTED_VALUE, T_INTERPOLATION
};

static const char *tok_name[] = {
    "end of input", "'='", "'~'", "'+'", "'@'", "':'", "'/'", "a name", "a name",
    "a dotted path", "'('", "','", "')'", "'['", "']'", "'{'", "'}'", "a float", "an int",
    "a bool", "null", "a character", "an escape", "whitespace", "a quoted string",
    "an interpolation",
};

typedef struct tok {
    int type;
    size_t pos, len;
} tok;

typedef struct ctx {
    const char *s;
    tok *t;
    size_t nt, cap, i;
    int bridge, failed;
    char *err;
    size_t errn;
} ctx;

static void fail(ctx *c, size_t pos, const char *fmt, ...)
{
    va_list ap;
    int w;
    if (c->failed)
        return;
    c->failed = 1;
    if (!c->err || !c->errn)
        return;
    w = snprintf(c->err, c->errn, "at byte %zu: ", pos);
    if (w < 0 || (size_t)w >= c->errn)
        return;
    va_start(ap, fmt);
    vsnprintf(c->err + w, c->errn - (size_t)w, fmt, ap);
    va_end(ap);
}

/* ---- lexer fragments ------------------------------------------------------ */

static int is_char(int ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }
static int is_digit(int ch) { return ch >= '0' && ch <= '9'; }
static int is_ws(int ch) { return ch == ' ' || ch == '\t'; }

static size_t ws_run(const char *p)
{
    size_t n = 0;
    while (is_ws((unsigned char)p[n]))
        n++;
    return n;
}

/* DIGIT (('_')? DIGIT)*, longest; 0 when none */
static size_t digits(const char *p)
{
    size_t n;
    if (!is_digit((unsigned char)p[0]))
        return 0;
    n = 1;
    for (;;) {
        if (is_digit((unsigned char)p[n]))
            n++;
        else if (p[n] == '_' && is_digit((unsigned char)p[n + 1]))
            n += 2;
        else
            return n;
    }
}

/* INT_UNSIGNED: '0' | [1-9] (('_')? DIGIT)* */
static size_t int_unsigned(const char *p)
{
    if (p[0] == '0')
        return 1;
    if (p[0] >= '1' && p[0] <= '9')
        return digits(p);
    return 0;
}

/* ID: (CHAR|'_') (CHAR|DIGIT|'_'|'-')* */
static size_t m_id(const char *p)
{
    size_t n;
    if (!is_char((unsigned char)p[0]) && p[0] != '_')
        return 0;
    for (n = 1; is_char((unsigned char)p[n]) || is_digit((unsigned char)p[n]) || p[n] == '_' ||
                p[n] == '-';
         n++)
        ;
    return n;
}

/* KEY_SPECIAL: (CHAR|'_'|'$') (CHAR|DIGIT|'_'|'-'|'$')* */
static size_t m_key_special(const char *p)
{
    size_t n;
    if (!is_char((unsigned char)p[0]) && p[0] != '_' && p[0] != '$')
        return 0;
    for (n = 1; is_char((unsigned char)p[n]) || is_digit((unsigned char)p[n]) || p[n] == '_' ||
                p[n] == '-' || p[n] == '$';
         n++)
        ;
    return n;
}

/* DOT_PATH: (KEY_SPECIAL | INT_UNSIGNED) ('.' (KEY_SPECIAL | INT_UNSIGNED))+,
 * longest.  A segment can only end at '.' or where its characters stop, so
 * each segment is taken whole. */
static size_t m_dot_path(const char *p)
{
    size_t n = 0, best = 0, seg;
    int dots = 0;
    for (;;) {
        seg = m_key_special(p + n);
        if (!seg)
            seg = int_unsigned(p + n);
        if (!seg)
            return best;
        n += seg;
        if (dots)
            best = n;
        if (p[n] != '.')
            return best;
        n++;
        dots++;
    }
}

static int ci_eq(const char *p, const char *word)
{
    size_t i;
    for (i = 0; word[i]; i++) {
        int ch = (unsigned char)p[i];
        if (ch >= 'A' && ch <= 'Z')
            ch += 'a' - 'A';
        if (ch != word[i])
            return 0;
    }
    return 1;
}

/* FLOAT: [+-]? (POINT_FLOAT | EXPONENT_FLOAT | inf | nan), longest.
 * POINT_FLOAT: INT_UNSIGNED '.' | INT_UNSIGNED? '.' DIGIT (('_')? DIGIT)*
 * EXPONENT_FLOAT: (INT_UNSIGNED | POINT_FLOAT) [eE] [+-]? DIGIT (('_')? DIGIT)* */
static size_t m_float(const char *s)
{
    size_t sign = (s[0] == '+' || s[0] == '-'), best = 0, iu, d, k, q;
    const char *p = s + sign;
    size_t mant[4];
    int nm = 0, i;
    if (ci_eq(p, "inf") || ci_eq(p, "nan"))
        best = sign + 3;
    iu = int_unsigned(p);
    if (iu) {
        mant[nm++] = iu; /* INT_UNSIGNED: a mantissa for the exponent form only */
        if (p[iu] == '.') {
            mant[nm++] = iu + 1;
            if (sign + iu + 1 > best)
                best = sign + iu + 1;
            d = digits(p + iu + 1);
            if (d) {
                mant[nm++] = iu + 1 + d;
                if (sign + iu + 1 + d > best)
                    best = sign + iu + 1 + d;
            }
        }
    } else if (p[0] == '.' && (d = digits(p + 1))) {
        mant[nm++] = 1 + d;
        if (sign + 1 + d > best)
            best = sign + 1 + d;
    }
    for (i = 0; i < nm; i++) {
        k = mant[i];
        if (p[k] != 'e' && p[k] != 'E')
            continue;
        q = k + 1;
        if (p[q] == '+' || p[q] == '-')
            q++;
        d = digits(p + q);
        if (d && sign + q + d > best)
            best = sign + q + d;
    }
    return best;
}

static size_t m_int(const char *s)
{
    size_t sign = (s[0] == '+' || s[0] == '-'), iu = int_unsigned(s + sign);
    return iu ? sign + iu : 0;
}

/* ESC: ('\\\\' | '\\(' | '\\)' | '\\[' | '\\]' | '\\{' | '\\}' | '\\:' | '\\=' |
 *       '\\,' | '\\ ' | '\\\t')+ */
static size_t m_esc(const char *p)
{
    size_t n = 0;
    while (p[n] == '\\' && p[n + 1] && strchr("\\()[]{}:=, \t", p[n + 1]))
        n += 2;
    return n;
}

/* QUOTED_VALUE: the opening quote, then the shortest run ending at the same
 * quote preceded by an even number (0 included) of backslashes. */
static size_t m_quoted(const char *p)
{
    size_t i, bs = 0;
    char q = p[0];
    if (q != '\'' && q != '"')
        return 0;
    for (i = 1; p[i]; i++) {
        if (p[i] == q && bs % 2 == 0)
            return i + 1;
        bs = p[i] == '\\' ? bs + 1 : 0;
    }
    return 0;
}

/* INTERPOLATION: '${' ~('}')+ '}' */
static size_t m_interp(const char *p)
{
    size_t i;
    if (p[0] != '$' || p[1] != '{')
        return 0;
    for (i = 2; p[i] && p[i] != '}'; i++)
        ;
    return p[i] == '}' && i > 2 ? i + 1 : 0;
}

static int push(ctx *c, int type, size_t pos, size_t len)
{
    if (c->nt == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 32;
        tok *t = realloc(c->t, cap * sizeof *t);
        if (!t) {
            fail(c, pos, "out of memory");
            return -1;
        }
        c->t = t;
        c->cap = cap;
    }
    c->t[c->nt].type = type;
    c->t[c->nt].pos = pos;
    c->t[c->nt].len = len;
    c->nt++;
    return 0;
}

static void char_desc(const char *p, char *buf, size_t n)
{
    unsigned char ch = (unsigned char)*p;
    if (ch == '\t')
        snprintf(buf, n, "a tab");
    else if (ch == ' ')
        snprintf(buf, n, "a space");
    else if (ch < 0x20 || ch == 0x7f)
        snprintf(buf, n, "control byte 0x%02x", ch);
    else if (ch >= 0x80)
        snprintf(buf, n, "non-ASCII byte 0x%02x", ch);
    else
        snprintf(buf, n, "'%c'", ch);
}

/* Key mode: EQUAL TILDE PLUS AT COLON SLASH KEY_ID KEY_SPECIAL DOT_PATH. */
static int lex_key(ctx *c, size_t *at)
{
    const char *s = c->s;
    size_t i = *at, l_id, l_ks, l_dp;
    char d[32];
    while (s[i]) {
        switch (s[i]) {
        case '=':
            push(c, T_EQUAL, i, 1 + ws_run(s + i + 1));
            *at = i + c->t[c->nt - 1].len;
            return c->failed ? -1 : 1;
        case '~': push(c, T_TILDE, i, 1); i++; continue;
        case '+': push(c, T_PLUS, i, 1); i++; continue;
        case '@': push(c, T_AT, i, 1); i++; continue;
        case ':': push(c, T_COLON, i, 1); i++; continue;
        case '/': push(c, T_SLASH, i, 1); i++; continue;
        default: break;
        }
        l_id = m_id(s + i);
        l_ks = m_key_special(s + i);
        l_dp = m_dot_path(s + i);
        if (l_dp > l_ks && l_dp > l_id)
            push(c, T_DOT_PATH, i, l_dp), i += l_dp;
        else if (l_ks > l_id)
            push(c, T_KEY_SPECIAL, i, l_ks), i += l_ks;
        else if (l_id)
            push(c, T_ID, i, l_id), i += l_id;
        else {
            char_desc(s + i, d, sizeof d);
            if (is_ws((unsigned char)s[i]))
                fail(c, i, "%s in the key (no whitespace is allowed before '=')", d);
            else if (s[i] == '.')
                fail(c, i, "'.' without a name on both sides in the key");
            else if (is_digit((unsigned char)s[i]))
                fail(c, i, "a key segment may be a number only between dots, without a "
                           "leading zero");
            else
                fail(c, i, "%s cannot appear in a key (keys are names, $names and numbers "
                           "joined by '.', with '/', '@', '+' and '~')", d);
            return -1;
        }
        if (c->failed)
            return -1;
    }
    *at = i;
    return 0;
}

/* Value mode, rules in order: POPEN COMMA PCLOSE BRACKET_OPEN BRACKET_CLOSE
 * BRACE_OPEN BRACE_CLOSE VALUE_COLON VALUE_EQUAL FLOAT INT BOOL NULL
 * UNQUOTED_CHAR ID ESC WS QUOTED_VALUE INTERPOLATION. */
static int lex_value(ctx *c, size_t i)
{
    const char *s = c->s;
    char d[32];
    while (s[i]) {
        size_t w = ws_run(s + i), best = 0, l;
        int type = -1;
        const char *p = s + i;
        char after = p[w];
        /* the punctuation rules, each WS? x WS? as the grammar says */
        if (after == '(')
            type = T_POPEN, best = w + 1 + ws_run(p + w + 1);
        else if (after == ',')
            type = T_COMMA, best = w + 1 + ws_run(p + w + 1);
        else if (after == ')')
            type = T_PCLOSE, best = w + 1;
        else if (after == ']')
            type = T_BRACKET_CLOSE, best = w + 1;
        else if (after == '}')
            type = T_BRACE_CLOSE, best = w + 1;
        else if (after == ':')
            type = T_COLON, best = w + 1 + ws_run(p + w + 1);
        else if (after == '=')
            type = T_EQUAL, best = w + 1 + ws_run(p + w + 1);
        else if (!w && p[0] == '[')
            type = T_BRACKET_OPEN, best = 1 + ws_run(p + 1);
        else if (!w && p[0] == '{')
            type = T_BRACE_OPEN, best = 1 + ws_run(p + 1);
        if (w && type < 0)
            type = T_WS, best = w;
        if (!w) {
            /* a punctuation rule above is never beaten: no other rule starts
             * with those characters ('[' and '{' stand alone too) */
            if (type < 0) {
                if ((l = m_float(p)) > best)
                    best = l, type = T_FLOAT;
                if ((l = m_int(p)) > best)
                    best = l, type = T_INT;
                if ((ci_eq(p, "true") ? 4 : ci_eq(p, "false") ? 5 : 0) > best)
                    best = ci_eq(p, "true") ? 4 : 5, type = T_BOOL;
                if (ci_eq(p, "null") && 4 > best)
                    best = 4, type = T_NULL;
                if (strchr("/-\\+.$%*@?|", p[0]) && 1 > best)
                    best = 1, type = T_UNQUOTED_CHAR;
                if ((l = m_id(p)) > best)
                    best = l, type = T_ID;
                if ((l = m_esc(p)) > best)
                    best = l, type = T_ESC;
                if ((l = m_quoted(p)) > best)
                    best = l, type = T_QUOTED_VALUE;
                if ((l = m_interp(p)) > best)
                    best = l, type = T_INTERPOLATION;
            }
        }
        if (type < 0 || !best) {
            char_desc(p, d, sizeof d);
            if (p[0] == '\'' || p[0] == '"')
                fail(c, i, "unterminated quoted string (the closing %c must follow an even "
                           "number of backslashes)", p[0]);
            else
                fail(c, i, "%s is not allowed unquoted in a value; quote the value", d);
            return -1;
        }
        if (push(c, type, i, best) < 0)
            return -1;
        i += best;
    }
    return 0;
}

static int lex(ctx *c, int value_only)
{
    size_t at = 0;
    int r = 0;
    if (!value_only) {
        r = lex_key(c, &at);
        if (r < 0)
            return -1;
    }
    if (value_only || r == 1)
        if (lex_value(c, at) < 0)
            return -1;
    return push(c, T_EOF, strlen(c->s), 0);
}

/* ---- parser ----------------------------------------------------------------- */

static const tok *cur(const ctx *c) { return &c->t[c->i]; }
static int ty(const ctx *c, size_t k) { return c->i + k < c->nt ? c->t[c->i + k].type : T_EOF; }

static void unexpected(ctx *c, const char *expecting)
{
    const tok *t = cur(c);
    if (t->type == T_EOF)
        fail(c, t->pos, "the value ends early; expected %s", expecting);
    else
        fail(c, t->pos, "unexpected %s '%.*s'; expected %s", tok_name[t->type], (int)t->len,
             c->s + t->pos, expecting);
}

static int is_prim(int t)
{
    return t == T_ID || t == T_NULL || t == T_INT || t == T_FLOAT || t == T_BOOL ||
           t == T_INTERPOLATION || t == T_UNQUOTED_CHAR || t == T_COLON || t == T_ESC ||
           t == T_WS;
}

static int is_dict_key(int t)
{
    return t == T_ID || t == T_NULL || t == T_INT || t == T_FLOAT || t == T_BOOL ||
           t == T_UNQUOTED_CHAR || t == T_ESC || t == T_WS;
}

/* element result kinds, for the Bridge level */
enum { E_PRIM, E_LIST, E_DICT, E_CALL, E_SWEEP };

static int element(ctx *c);

/* Hydra's registered functions (OverridesParser.create) and whether the
 * result is a plain value (not a sweep). */
static int known_function(const char *name, size_t n, int *plain)
{
    static const struct { const char *n; int plain; } f[] = {
        {"int", 1}, {"str", 1}, {"bool", 1}, {"float", 1}, {"choice", 0}, {"range", 0},
        {"interval", 0}, {"tag", 0}, {"sort", 1}, {"shuffle", 1}, {"glob", 0},
    };
    size_t i;
    for (i = 0; i < sizeof f / sizeof f[0]; i++)
        if (strlen(f[i].n) == n && !memcmp(f[i].n, name, n)) {
            *plain = f[i].plain;
            return 1;
        }
    return 0;
}

static int function(ctx *c)
{
    const tok *name = cur(c);
    int plain = 1, kw = 0, any_sweep = 0, k;
    if (c->bridge && !known_function(c->s + name->pos, name->len, &plain)) {
        fail(c, name->pos,
             "'%.*s(' calls a function Hydra does not know (int, float, str, bool, sort, "
             "shuffle, choice, range, interval, glob, tag); a literal '(' must be quoted",
             (int)name->len, c->s + name->pos);
        return -1;
    }
    c->i += 2; /* ID POPEN */
    if (ty(c, 0) == T_PCLOSE) {
        c->i++;
        return plain ? E_CALL : E_SWEEP;
    }
    for (;;) {
        if (ty(c, 0) == T_ID && ty(c, 1) == T_EQUAL) {
            kw = 1;
            c->i += 2;
        } else if (kw && c->bridge) {
            fail(c, cur(c)->pos, "positional argument follows keyword argument");
            return -1;
        }
        k = element(c);
        if (k < 0)
            return -1;
        if (k == E_SWEEP)
            any_sweep = 1;
        if (ty(c, 0) == T_COMMA) {
            c->i++;
            continue;
        }
        if (ty(c, 0) == T_PCLOSE) {
            c->i++;
            break;
        }
        unexpected(c, "',' or ')' in the function call");
        return -1;
    }
    /* sort(a,b) of a sweep stays a sweep */
    return plain && !any_sweep ? E_CALL : E_SWEEP;
}

/* After one element k of a list or a dict: refused when it is a sweep
 * (Bridge), then ',' (0: another follows), the closing bracket (kind: the
 * container is done) or an error (-1). */
static int element_end(ctx *c, int k, const char *what, int close, int kind, const char *expect)
{
    if (k < 0)
        return -1;
    if (k == E_SWEEP && c->bridge) {
        fail(c, c->t[c->i - 1].pos, "a sweep cannot be %s", what);
        return -1;
    }
    if (ty(c, 0) == T_COMMA) {
        c->i++;
        return 0;
    }
    if (ty(c, 0) == close) {
        c->i++;
        return kind;
    }
    unexpected(c, expect);
    return -1;
}

static int list(ctx *c)
{
    int k;
    c->i++;
    if (ty(c, 0) == T_BRACKET_CLOSE) {
        c->i++;
        return E_LIST;
    }
    do
        k = element_end(c, element(c), "a list element", T_BRACKET_CLOSE, E_LIST,
                        "',' or ']' in the list");
    while (k == 0);
    return k;
}

static int primitive_ws_only(ctx *c, size_t from, size_t to)
{
    size_t j;
    for (j = from; j < to; j++)
        if (c->t[j].type != T_WS)
            return 0;
    return 1;
}

static int dict(ctx *c)
{
    size_t from;
    int k;
    c->i++;
    if (ty(c, 0) == T_BRACE_CLOSE) {
        c->i++;
        return E_DICT;
    }
    for (;;) {
        from = c->i;
        while (is_dict_key(ty(c, 0)))
            c->i++;
        if (c->i == from) {
            if (ty(c, 0) == T_QUOTED_VALUE || ty(c, 0) == T_INTERPOLATION)
                fail(c, cur(c)->pos, "a dict key cannot be %s", tok_name[ty(c, 0)]);
            else
                unexpected(c, "a dict key");
            return -1;
        }
        if (c->bridge && primitive_ws_only(c, from, c->i)) {
            fail(c, c->t[from].pos, "Trying to parse a primitive that is all whitespaces");
            return -1;
        }
        if (ty(c, 0) != T_COLON) {
            unexpected(c, "':' after the dict key");
            return -1;
        }
        c->i++;
        k = element_end(c, element(c), "a dict value", T_BRACE_CLOSE, E_DICT,
                        "',' or '}' in the dict");
        if (k)
            return k;
    }
}

static int element(ctx *c)
{
    int t = ty(c, 0);
    size_t from;
    if (t == T_ID && ty(c, 1) == T_POPEN)
        return function(c);
    if (t == T_BRACKET_OPEN)
        return list(c);
    if (t == T_BRACE_OPEN)
        return dict(c);
    if (t == T_QUOTED_VALUE) {
        c->i++;
        if (is_prim(ty(c, 0)) || ty(c, 0) == T_QUOTED_VALUE) {
            fail(c, cur(c)->pos, "nothing may follow a quoted string in the same value "
                                 "(quote the whole value)");
            return -1;
        }
        return E_PRIM;
    }
    if (is_prim(t)) {
        from = c->i;
        while (is_prim(ty(c, 0)))
            c->i++;
        if (c->bridge && primitive_ws_only(c, from, c->i)) {
            fail(c, c->t[from].pos, "Trying to parse a primitive that is all whitespaces");
            return -1;
        }
        if (ty(c, 0) == T_POPEN) {
            if (c->i - from == 1 && c->t[from].type != T_ID)
                fail(c, cur(c)->pos, "'(' opens a function call, and '%.*s' is no function "
                                     "name; quote the value",
                     (int)c->t[from].len, c->s + c->t[from].pos);
            else
                fail(c, cur(c)->pos, "'(' opens a function call, which cannot follow '%.*s'; "
                                     "quote the value",
                     (int)(cur(c)->pos - c->t[from].pos), c->s + c->t[from].pos);
            return -1;
        }
        if (ty(c, 0) == T_QUOTED_VALUE) {
            fail(c, cur(c)->pos, "a quoted string cannot follow unquoted text (quote the "
                                 "whole value)");
            return -1;
        }
        return E_PRIM;
    }
    if (t == T_POPEN)
        fail(c, cur(c)->pos, "'(' opens a function call and needs a function name before "
                             "it; quote the value (a Python expression such as ([0]*3+[1]*58) "
                             "must be written out as a list)");
    else if (t == T_EQUAL)
        fail(c, cur(c)->pos, "'=' is not allowed unquoted in a value (only in name=value "
                             "arguments of a function call); quote the value or write \\=");
    else
        unexpected(c, "a value");
    return -1;
}

/* value: element | element (COMMA element)+ ; the whole input must be used */
static int value(ctx *c)
{
    size_t start = cur(c)->pos;
    int k = element(c), sweep = 0;
    if (k < 0)
        return -1;
    if (k == E_SWEEP)
        sweep = 1;
    while (ty(c, 0) == T_COMMA) {
        c->i++;
        if (element(c) < 0)
            return -1;
        sweep = 1;
    }
    if (ty(c, 0) != T_EOF) {
        if (ty(c, 0) == T_PCLOSE || ty(c, 0) == T_BRACKET_CLOSE || ty(c, 0) == T_BRACE_CLOSE)
            fail(c, cur(c)->pos, "unbalanced '%.*s'", (int)cur(c)->len, c->s + cur(c)->pos);
        else
            unexpected(c, "end of input");
        return -1;
    }
    if (sweep && c->bridge) {
        fail(c, start, "this value is a sweep (a,b or choice/range/interval/glob), which "
                       "Bridge cannot apply; write a list as [a,b] or quote a literal ','");
        return -1;
    }
    return 0;
}

/* key: packageOrGroup (AT package)? ; packageOrGroup: package | ID (SLASH ID)+ ;
 * package: ( | ID | KEY_SPECIAL | DOT_PATH) */
static int is_pkg(int t) { return t == T_ID || t == T_KEY_SPECIAL || t == T_DOT_PATH; }

static int key(ctx *c)
{
    size_t start = cur(c)->pos;
    int empty = 1;
    if (ty(c, 0) == T_ID && ty(c, 1) == T_SLASH) {
        c->i++;
        while (ty(c, 0) == T_SLASH) {
            c->i++;
            if (ty(c, 0) != T_ID) {
                unexpected(c, "a config group name after '/'");
                return -1;
            }
            c->i++;
        }
        if (c->bridge) {
            fail(c, start, "a config group path (a/b) is not a ConfigContainer field; "
                           "Bridge's recipes have no config groups");
            return -1;
        }
        empty = 0;
    } else if (is_pkg(ty(c, 0))) {
        c->i++;
        empty = 0;
    }
    if (ty(c, 0) == T_AT) {
        if (c->bridge) {
            fail(c, cur(c)->pos, "'@package' applies to config groups, which Bridge's "
                                 "recipes do not have");
            return -1;
        }
        c->i++;
        if (is_pkg(ty(c, 0)))
            c->i++;
        empty = 0;
    }
    if (empty && c->bridge) {
        fail(c, start, "the key is empty");
        return -1;
    }
    return 0;
}

static int override(ctx *c)
{
    int del = 0;
    if (ty(c, 0) == T_TILDE) {
        del = 1;
        c->i++;
    } else if (ty(c, 0) == T_PLUS) {
        c->i++;
        if (ty(c, 0) == T_PLUS)
            c->i++;
    }
    if (key(c) < 0)
        return -1;
    if (ty(c, 0) == T_EOF && del)
        return 0;
    if (ty(c, 0) != T_EQUAL) {
        if (ty(c, 0) == T_EOF)
            fail(c, cur(c)->pos, "no '=': an override is key=value (or ~key)");
        else
            unexpected(c, del ? "'=' or the end after the key" : "'=' after the key");
        return -1;
    }
    c->i++;
    if (ty(c, 0) == T_EOF)
        return 0; /* key= : the empty string */
    return value(c);
}

static int run(const char *s, int value_only, int bridge, char *err, size_t n)
{
    ctx c;
    int r;
    memset(&c, 0, sizeof c);
    c.s = s ? s : "";
    c.bridge = bridge;
    c.err = err;
    c.errn = n;
    if (err && n)
        err[0] = '\0';
    r = lex(&c, value_only);
    if (!r)
        r = value_only ? (ty(&c, 0) == T_EOF ? 0 : value(&c)) : override(&c);
    free(c.t);
    return r < 0 || c.failed ? -1 : 0;
}

int mt_hydra_check(const char *override_, char *err, size_t n)
{
    return run(override_, 0, 0, err, n);
}

int mt_hydra_check_bridge(const char *override_, char *err, size_t n)
{
    return run(override_, 0, 1, err, n);
}

int mt_hydra_check_value(const char *v, int bridge, char *err, size_t n)
{
    return run(v, 1, bridge, err, n);
}

/* ---- quoting ---------------------------------------------------------------- */

int mt_hydra_quote(const char *v, char *out, size_t n)
{
    char q = '\'';
    size_t o = 0, i, j, bs;
    if (!v)
        v = "";
    if (strchr(v, '\'') && !strchr(v, '"'))
        q = '"';
#define PUT(ch)                                                                             \
    do {                                                                                    \
        if (o + 1 >= n)                                                                     \
            return -1;                                                                      \
        out[o++] = (ch);                                                                    \
    } while (0)
    PUT(q);
    for (i = 0; v[i];) {
        if (v[i] != '\\' && v[i] != q) {
            PUT(v[i]);
            i++;
            continue;
        }
        /* a run of backslashes, then what follows it */
        for (bs = 0; v[i + bs] == '\\'; bs++)
            ;
        if (v[i + bs] == q) { /* b backslashes + quote: 2b+1 backslashes + quote */
            for (j = 0; j < 2 * bs + 1; j++)
                PUT('\\');
            PUT(q);
            i += bs + 1;
        } else if (!v[i + bs]) { /* trailing: doubled */
            for (j = 0; j < 2 * bs; j++)
                PUT('\\');
            i += bs;
        } else {
            for (j = 0; j < bs; j++)
                PUT('\\');
            i += bs;
        }
    }
    PUT(q);
#undef PUT
    out[o] = '\0';
    return (int)o;
}

static int copy_out(const char *v, char *out, size_t n)
{
    size_t l = strlen(v);
    if (l + 1 > n)
        return -1;
    memcpy(out, v, l + 1);
    return (int)l;
}

/* 1 when the bare text is a value Hydra reads back as the same string;
 * typed_ok: a single typed token (int, float, bool, null) counts too. */
static int bare_ok(const char *v, int typed_ok)
{
    ctx c;
    size_t j;
    int ok = 1, r;
    if (!v || !*v)
        return 0;
    memset(&c, 0, sizeof c);
    c.s = v;
    r = lex(&c, 1);
    if (r || c.nt < 2)
        ok = 0;
    for (j = 0; ok && j + 1 < c.nt; j++) {
        int t = c.t[j].type;
        if (!is_prim(t) || t == T_WS || t == T_ESC || t == T_INTERPOLATION ||
            (t == T_COLON && c.t[j].len != 1))
            ok = 0;
    }
    if (ok && c.nt == 2 && !typed_ok) {
        int t = c.t[0].type;
        if (t == T_INT || t == T_FLOAT || t == T_BOOL || t == T_NULL)
            ok = 0;
    }
    free(c.t);
    return ok;
}

int mt_hydra_string(const char *v, char *out, size_t n)
{
    if (bare_ok(v, 0))
        return copy_out(v, out, n);
    return mt_hydra_quote(v, out, n);
}

int mt_hydra_list(const char *words, int as_strings, char *out, size_t n)
{
    size_t o = 0, len;
    const char *p = words ? words : "";
    char *w, *e;
    int first = 1, k;
    if (n < 3)
        return -1;
    out[o++] = '[';
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        len = strcspn(p, " ");
        w = malloc(len + 1);
        e = malloc(2 * len + 3);
        if (!w || !e) {
            free(w);
            free(e);
            return -1;
        }
        memcpy(w, p, len);
        w[len] = '\0';
        if (as_strings)
            k = mt_hydra_string(w, e, 2 * len + 3);
        else if (bare_ok(w, 1))
            k = copy_out(w, e, 2 * len + 3);
        else
            k = mt_hydra_quote(w, e, 2 * len + 3);
        free(w);
        if (k < 0 || o + (size_t)k + (first ? 0 : 1) + 2 > n) {
            free(e);
            return -1;
        }
        if (!first)
            out[o++] = ',';
        memcpy(out + o, e, (size_t)k);
        o += (size_t)k;
        free(e);
        first = 0;
        p += len;
    }
    out[o++] = ']';
    out[o] = '\0';
    return (int)o;
}
