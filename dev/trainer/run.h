/*
dev/trainer/run.h: the training loop's bookkeeping (the loop itself is dev/trainer/train_loop.h):
what SIGINT, SIGTERM and SIGHUP do, when to validate, sample and checkpoint, the training state a
checkpoint records, main.log. Whether a step's update is skipped is dev/trainer/step_guard.h.
*/
#ifndef DEV_TRAINER_RUN_H
#define DEV_TRAINER_RUN_H

#include "run_checks.h"

// ----------------------------------------------------------------------------
// SIGINT, SIGTERM and SIGHUP during training: the handler only records the signal; the loop sees it at
// the top of the next step, writes a checkpoint there and returns 128 + the signal. The handler
// puts the default action back, so a second signal kills at once (a stuck step can still be
// interrupted). SA_RESTART: a checkpoint being written when the signal comes is not cut short by
// EINTR. SIGHUP (the terminal or the ssh session closed, the launcher's parent gone) stops a run as
// SIGTERM does: with a checkpoint, not killed mid-step. A signal ignored when the run starts stays
// ignored (nohup's SIGHUP, a script's background job, which the shell starts with SIGINT ignored so
// that Ctrl-C at the terminal spares it).

static volatile sig_atomic_t g_train_stop_signal = 0;
static const int kTrainStopSignals[3] = {SIGINT, SIGTERM, SIGHUP};
static int g_train_stop_caught[3] = {0, 0, 0}; // which of them train_signals_install caught

static void train_stop_handler(int sig) {
    g_train_stop_signal = sig;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int i = 0; i < 3; i++) {
        if (g_train_stop_caught[i]) { sigaction(kTrainStopSignals[i], &dfl, NULL); }
    }
}

static void train_signals_install(void) {
    g_train_stop_signal = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = train_stop_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int i = 0; i < 3; i++) {
        struct sigaction old;
        g_train_stop_caught[i] = sigaction(kTrainStopSignals[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN &&
                                 sigaction(kTrainStopSignals[i], &sa, NULL) == 0;
    }
}

static const char* train_signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
}

// ----------------------------------------------------------------------------
// the training loop's bookkeeping, the same in both trainers

// the sampling RNG's first state for --seed (xorshift64* must not start at 0)
static unsigned long long sampling_rng_init(unsigned long long seed) {
    const unsigned long long rng = seed * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL;
    return rng != 0 ? rng : 1;
}

// the steps of the run: -x, or one epoch of the train data (at least one step)
static int train_num_steps(const TrainArgs* a, size_t train_tokens) {
    if (a->max_steps >= 0) { return a->max_steps; }
    const int steps = (int)(train_tokens / (size_t)a->total_batch);
    return steps >= 1 ? steps : 1;
}

// batches per validation: the whole validation set, or its first -m batches
static int val_num_batches(const TrainArgs* a, size_t loader_batches) {
    const int all = (int)loader_batches;
    return a->val_max_steps > 0 && a->val_max_steps < all ? a->val_max_steps : all;
}

// Whether the loop, at the top of `step` (0..num_steps, before that step's update), samples text or
// writes a checkpoint: every N steps and at the end, never at step 0. A resumed run skips the step
// it starts from: the interrupted run sampled there before it saved the RNG state, and that
// checkpoint is the one it resumes from.
// validation runs at the top of every val_every-th step and of the last one
static int val_due(const TrainArgs* a, int step, int num_steps) {
    return a->val_every > 0 && (step % a->val_every == 0 || step == num_steps);
}
static int sample_due(const TrainArgs* a, int step, int start_step, int num_steps) {
    return a->sample_every > 0 && step > 0 && !(a->resuming && step == start_step) &&
           (step % a->sample_every == 0 || step == num_steps);
}
static int checkpoint_due(const TrainArgs* a, int step, int start_step, int num_steps) {
    return a->checkpoint_every > 0 && step > 0 && step != start_step &&
           (step % a->checkpoint_every == 0 || step == num_steps);
}

// A signal seen at the top of `step` (g_train_stop_signal) ends the run there, after the sample
// due at that step (so that the saved RNG state is the one an uninterrupted run has there): a
// checkpoint at `step` when there is -o and a step was trained since the run started; the
// checkpoint at `step` is then the one -n would write, and -y 1 continues exactly.
static int stop_checkpoint_due(const TrainArgs* a, int step, int start_step) {
    return a->output_dir != NULL && step != start_step;
}
// says how the run ended on signal `sig` at the top of `step`, on stdout and in main.log; returns the
// exit code (128 + sig, the shell's convention for a process ended by a signal)
static int stop_report(const TrainArgs* a, int sig, int step, int start_step, const char* model_path, FILE* logf) {
    const char* name = train_signal_name(sig);
    char line[8400];
    const size_t line_size = sizeof(line);
    if (a->output_dir == NULL) {
        snprintf(line, line_size, "stopped by %s at step %d: no checkpoint was written (no -o)", name, step);
    } else if (step == start_step && a->resuming) {
        snprintf(line, line_size, "stopped by %s at step %d, before any step of this run: no new checkpoint, %s is still "
                 "the latest", name, step, a->state_path);
    } else if (step == start_step) {
        snprintf(line, line_size, "stopped by %s before the first step: nothing trained, no checkpoint was written", name);
    } else {
        snprintf(line, line_size, "stopped by %s at step %d: checkpoint %s written (-y 1 resumes from it)", name, step,
                 model_path);
    }
    printf("%s\n", line);
    logf_line(logf, line);
    return 128 + sig;
}

// what a checkpoint at `step` saves beside the model
// loader: where the training data stands at the top of `step` (dataloader_get_state)
static TrainState train_state_at(const TrainArgs* a, int step, int num_steps, int skipped, unsigned long long rng,
                                 const DataLoaderState* loader) {
    TrainState st;
    memset(&st, 0, sizeof(st));
    st.step = step;
    st.skipped = skipped;
    st.B = a->B;
    st.T = a->T;
    st.grad_accum_steps = a->grad_accum_steps;
    st.rng_state = rng;
    st.has_schedule = 1;
    st.schedule = run_schedule(a, num_steps);
    st.loader = *loader;
    return st;
}

// -o's main.log, appended to by a resumed run. Returns 1 with *logf (NULL without -o), or 0 after
// printing the error.
static int main_log_open(const TrainArgs* a, FILE** logf) {
    *logf = NULL;
    if (a->output_dir == NULL) { return 1; }
    char log_path[4096];
    snprintf(log_path, sizeof(log_path), "%s/main.log", a->output_dir);
    *logf = fopen(log_path, a->resuming ? "a" : "w");
    if (*logf == NULL) {
        fprintf(stderr, "error: %s: cannot open the log file (%s)\n", log_path, strerror(errno));
        return 0;
    }
    return 1;
}

#endif // DEV_TRAINER_RUN_H
