/*
 * hydra.h - Hydra's command-line override grammar, checked in C.
 *
 * Megatron-Bridge's run_recipe.py hands every trailing KEY=VALUE argument to
 * Hydra's OverridesParser (hydra-core 1.3: OverrideLexer.g4 and
 * OverrideParser.g4, unchanged from v1.3.2 to v1.3.5), then applies the
 * parsed overrides to the recipe's ConfigContainer turned into a struct-mode
 * OmegaConf DictConfig (ConfigLoaderImpl._apply_overrides_to_config).  This
 * module is moetune's own reading of that grammar: the lexer's two modes
 * (key, value) with ANTLR's longest-match-then-first-rule token choice, and
 * the parser's rules, so that a rendered override can be judged before any
 * launch.  No Hydra code is used.
 *
 * Two levels:
 *   mt_hydra_check         exactly the grammar (what parses without a
 *                          syntax error; function names are not resolved)
 *   mt_hydra_check_bridge  what Bridge's parse_hydra_overrides also takes:
 *                          the grammar, plus Hydra's parse-time checks (known
 *                          function names, no positional argument after a
 *                          keyword one, no all-whitespace primitive) and the
 *                          application's (no sweep, no @package, no config
 *                          group path, a non-empty key)
 *
 * Positions in messages are byte offsets from 0 (Hydra counts code points;
 * the two agree on ASCII, and non-ASCII is only legal inside quotes).
 */
#ifndef MT_HYDRA_H
#define MT_HYDRA_H

#include <stddef.h>

/* 0 when `override` (one argv word, e.g. "model.tensor_model_parallel_size=2")
 * is accepted by Hydra's override grammar, else -1 with a message in err
 * naming the byte position and what is wrong.  err may be NULL. */
int mt_hydra_check(const char *override, char *err, size_t n);

/* The same, stricter: what Megatron-Bridge accepts (see above). */
int mt_hydra_check_bridge(const char *override, char *err, size_t n);

/* Checks a value alone (what follows '='), with the same two levels
 * (bridge != 0: the stricter one). */
int mt_hydra_check_value(const char *value, int bridge, char *err, size_t n);

/* Writes into out the quoted form of the string `value` that Hydra reads
 * back as exactly that string (a QuotedString; OmegaConf still resolves
 * "${...}" in strings, quoted or not).  Single quotes unless the value holds
 * a single quote and no double quote; backslashes before a quote of the
 * kind used, and at the end, are doubled (plus one for the quote).  Returns
 * the length written, or -1 when out (n bytes) is too small. */
int mt_hydra_quote(const char *value, char *out, size_t n);

/* A string value in its shortest form: unquoted when Hydra reads the bare
 * text back as the same string (one ID, or several value tokens with no
 * whitespace, escape, interpolation or typed-only token such as 1, 1.5,
 * true, null), else mt_hydra_quote's form.  "bf16_mixed" stays bare,
 * "Et|(tt|)*30mL" and "1" are quoted.  Returns as mt_hydra_quote. */
int mt_hydra_string(const char *value, char *out, size_t n);

/* A list from space-separated words: "[w1,w2,...]"; each word as
 * mt_hydra_string when as_strings, else bare when it is a single typed or ID
 * token (ints, floats, bools, null, names) and quoted otherwise.  "" gives
 * "[]".  Returns as mt_hydra_quote. */
int mt_hydra_list(const char *words, int as_strings, char *out, size_t n);

#endif
