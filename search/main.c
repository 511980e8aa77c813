/*
 * main.c - the `moetune` command-line front end: the top floor.  It only
 * dispatches: each command lives with the floor it serves (core/cmd_core.c,
 * workers/cmd_workers.c, search/cmd_search.c and cmd_tune.c), and every
 * one parses its options with core/cli.h's table parser, so each takes
 * --help and answers a usage error the same way, with exit 64.
 *
 * Exit codes: 0 success, 1 a failure of moetune or a plugin, 2 bad input
 * (contract, knob, value, illegal combination), 64 usage; tune and bisect:
 * 75 another process owns the directory; tune: 128 + N stopped by signal N
 * (SIGTERM, SIGINT).  README.md lists each command's.
 */
#include "cli.h"
#include "cmd_core.h"
#include "cmd_search.h"
#include "cmd_workers.h"
#include "rankexec.h"

#include <moetune/plugin.h>

#include <stdio.h>
#include <string.h>

#ifndef MOETUNE_VERSION
#define MOETUNE_VERSION "0.1.0"
#endif

static void usage(FILE *out)
{
    fprintf(out,
            "usage: moetune <command> [options]\n"
            "\n"
            "  plugins [CONTRACT]            list loaded plugins, their knobs and load errors\n"
            "  check CONTRACT                validate a contract; print meshes and memory (exit 0\n"
            "                                legal and the base fits, 2 not legal, 4 legal but\n"
            "                                the base does not fit by the estimate)\n"
            "  check --startup-only CONTRACT  only what the training program's own start-up\n"
            "                                checks say of the base config (exit 0 legal, 2 not)\n"
            "  import [--stack NAME=VERSION]... [--hardware gpu=G,gpus_per_node=P,nodes=N]\n"
            "       [--env NAME=VALUE]... [--dialect mlm|bridge] [--backend sim|command]\n"
            "       [--name NAME] [-o FILE] (-- ARGV... | --argv FILE)\n"
            "                                a contract from an existing Megatron-LM command line\n"
            "  render CONTRACT [--set knob=value]... [--dialect mlm|bridge]\n"
            "       [--argv-only | --format env|sh|launch]\n"
            "                                the launch command for the base config (+ sets):\n"
            "                                argv one word a line, then the environment and\n"
            "                                launcher settings; --argv-only the argv alone;\n"
            "                                --format env NAME=value lines (sh-quoted), sh a\n"
            "                                runnable script (exports, then the command)\n"
            "  candidates CONTRACT [--wall W] [--set knob=value]...\n"
            "                                every plugin's candidates, with repairs and legality;\n"
            "                                --wall W: the plugins see W as the profiled wall (as\n"
            "                                in a tune) and only W's candidates are listed\n"
            "  demo [CONTRACT] [--dir DIR]   check the example contract and tune it on the simulator\n"
            "  calibration [--fit]           the simulator against the published numbers\n"
            "  optimum CONTRACT              best config of the declared space (simulator, no noise)\n"
            "  space CONTRACT [--json]       the declared search space and the base's values (JSON)\n"
            "  model-screen CONTRACT [--set k=v]... [--replicates N] [--seed S] [--noise-free] [--stdin]\n"
            "                                one screen on the sim's model, as `tune --executor model`\n"
            "                                runs it (JSON; --stdin: one JSON object of sets a line)\n"
            "  runs DIR [--csv|--json]       the runs recorded in a tune directory's store\n"
            "  measure CONTRACT --dir DIR [--kind screen|validate] [--replicate N] [--set k=v]...\n"
            "                                run one measurement of the config, parse, verify, store\n"
            "  parse LOG [--json]            what moetune reads from a training log\n"
            "  profile TRACE [--window A:B] [--device N] [--json] [--compare TRACE2] [--contract C]\n"
            "                                unions of a Kineto or Nsight Systems trace: hidden and exposed\n"
            "                                communication, idle gaps, the wall, the activation evidence\n"
            "  tune CONTRACT --dir DIR [--strategy ofat|grid|random] [--until HH:MM] [--jobs N]\n"
            "       [--executor local|model] [--gpu-hours X] [--runs N] [--seed N] [--notify CMD]\n"
            "                                the unattended evidence-gated tune, ending in a\n"
            "                                validated recipe and bundle.json, REPORT.md, report.html\n"
            "  tune --resume DIR             continue a tune after a crash, kill or stop: nothing\n"
            "                                finished runs again (the stored options, contract and\n"
            "                                environment apply; one that differs is refused)\n"
            "  status DIR                    a tune's live state (from another terminal)\n"
            "  recipe DIR [--format mlm|bridge|env|sbatch]\n"
            "                                the finished tune's recipe, as written into DIR:\n"
            "                                the Megatron-LM command (default), Megatron-Bridge\n"
            "                                overrides, the environment, or a Slurm batch script\n"
            "  bisect CONTRACT --good REV --bad REV (--repo PATH | --revs FILE) --dir DIR ...\n"
            "                                the commit a throughput regression came in with\n"
            "                                (moetune bisect --help for every option)\n"
            "  worker --connect tcp://HOST:PORT [--allow PROGRAM]... [--key DIR/NAME --server-key F]\n"
            "                                a ZeroMQ worker that runs a tune's jobs on this node\n"
            "  keygen DIR NAME [--force]     a CURVE keypair for the coordinator or a worker\n"
            "  rank-exec -- PROGRAM [ARGS]   (an srun task) RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,\n"
            "                                MASTER_PORT from Slurm's variables, then PROGRAM\n"
            "\n"
            "Plugins: built-ins, then MOETUNE_PLUGIN_PATH (colon-separated); a contract names\n"
            "the plugins it needs in launch.plugins, and the files of its launch.plugin_path\n"
            "load only with --trust-plugin-path.  Every command takes --trust-plugin-path and\n"
            "--plugin-timeout S (each plugin call's limit, default 60 s; 0: none).\n"
            "Walls: memory, communication, host, compute.\n");
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"plugins", mt_cmd_plugins},       {"check", mt_cmd_check},
    {"import", mt_cmd_import},         {"render", mt_cmd_render},
    {"candidates", mt_cmd_candidates}, {"parse", mt_cmd_parse},
    {"runs", mt_cmd_runs},             {"space", mt_cmd_space},
    {"measure", mt_cmd_measure},       {"profile", mt_cmd_profile},
    {"worker", mt_cmd_worker},         {"keygen", mt_cmd_keygen},
    {"rank-exec", mt_rank_exec_main},  {"calibration", mt_cmd_calibration},
    {"tune", mt_cmd_tune},             {"status", mt_cmd_status},
    {"demo", mt_cmd_demo},             {"bisect", mt_cmd_bisect},
    {"optimum", mt_cmd_optimum},       {"recipe", mt_cmd_recipe},
    {"model-screen", mt_cmd_model_screen},
};

int main(int argc, char **argv)
{
    size_t i;
    if (mt_cli_global_options(&argc, argv))
        return MT_EXIT_USAGE;
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? MT_EXIT_USAGE : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("moetune %s (plugin ABI %d)\n", MOETUNE_VERSION, MT_PLUGIN_ABI_VERSION);
        return 0;
    }
    for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc, argv);
    fprintf(stderr, "moetune: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return MT_EXIT_USAGE;
}
