#include "layout.h"

#include <stdlib.h>
#include <string.h>

/* Reads "*k" after position p; returns k (>= 1) and advances *p, or 1 when
 * there is no repeat.  -1 when the count is missing or absurd. */
static long repeat_count(const char *s, size_t *p)
{
    char *end;
    long k;
    if (s[*p] != '*')
        return 1;
    k = strtol(s + *p + 1, &end, 10);
    if (end == s + *p + 1 || k < 1 || k > 100000)
        return -1;
    *p = (size_t)(end - s);
    return k;
}

int mt_layout_parse(const char *s, mt_layout_stage *st, int max, int *err_pos)
{
    int n = 0, group_start = -1, in_group = 0;
    size_t p = 0;
    mt_layout_stage cur = {0, 0, 0, 0};
    if (err_pos)
        *err_pos = 0;
    if (!s || max < 1)
        return -1;
    while (s[p]) {
        char ch = s[p];
        if (ch == ',' || ch == ' ') {
            p++;
            continue;
        }
        if (ch == 't' || ch == 'm' || ch == 'E' || ch == 'L') {
            long k;
            p++;
            k = repeat_count(s, &p);
            if (k < 0)
                goto bad;
            if (ch == 't')
                cur.t += (int)k;
            else if (ch == 'm')
                cur.m += (int)k;
            else if (ch == 'E')
                cur.e += (int)k;
            else
                cur.l += (int)k;
            continue;
        }
        if (ch == '|') {
            if (n >= max)
                goto bad;
            st[n++] = cur;
            memset(&cur, 0, sizeof cur);
            p++;
            continue;
        }
        if (ch == '(') {
            /* a group starts a stage and its stages end with '|' inside */
            if (in_group || cur.t || cur.m || cur.e || cur.l)
                goto bad;
            in_group = 1;
            group_start = n;
            p++;
            continue;
        }
        if (ch == ')') {
            long k, r;
            int len, i;
            if (!in_group)
                goto bad;
            p++;
            k = repeat_count(s, &p);
            if (k < 0)
                goto bad;
            /* a trailing partial stage inside the group belongs to it too */
            if (cur.t || cur.m || cur.e || cur.l) {
                if (n >= max)
                    goto bad;
                st[n++] = cur;
                memset(&cur, 0, sizeof cur);
            }
            len = n - group_start;
            for (r = 1; r < k; r++)
                for (i = 0; i < len; i++) {
                    if (n >= max)
                        goto bad;
                    st[n++] = st[group_start + i];
                }
            in_group = 0;
            continue;
        }
        goto bad;
    }
    if (in_group)
        goto bad;
    if (n >= max)
        goto bad;
    st[n++] = cur;
    return n;
bad:
    if (err_pos)
        *err_pos = (int)p;
    return -1;
}
