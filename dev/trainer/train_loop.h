/*
dev/trainer/train_loop.h: the training loop, written once for both trainers. Every step goes the
same way in both: at its top, validation, a sample and a checkpoint when they are due (run.h says
when) and the stop signal; then the step's gradients, whether it may update (step_guard.h), the
update and the step's line. The model's own work differs, and each trainer supplies it as a
Trainer (below): the GPU's kernels in train_gpt2.cu (CudaTrainer), the CPU's loops in
dev/cpu/train_gpt2_cpu.cpp (CpuTrainer).

Each trainer includes this after its own --profile marks (profile_mark, profile_step_begin,
profile_step_end: cudaEvents in dev/trainer/profile.cuh, the clock on the CPU) and before its
train_run, which opens the data, builds the model and hands both to train_loop.
*/
#ifndef DEV_TRAINER_TRAIN_LOOP_H
#define DEV_TRAINER_TRAIN_LOOP_H

// What the loop asks of a trainer's model. Every call is made on every process of a run (their
// collectives meet there) unless it says otherwise. Those that return an int return 1, or 0 when the
// run must end: after printing the error, or with it in msg where there is one.
struct Trainer {
    // one validation batch's forward pass; its loss counts toward the next mean_loss
    virtual int eval_forward(const DataLoader* batch) = 0;
    // the mean of the losses since the last call, over every process (`what` names the all-reduce)
    virtual int mean_loss(double* loss, const char* what) = 0;
    // A step's gradients: zeroed, then this process's micro-batches of the step, then summed over the
    // processes; with the step's mean loss and the global gradient norm before clipping. data_after:
    // where the training data stands once the step's batches are read (the next step's checkpoint).
    virtual int gradients(int step, double* loss, double* norm, DataLoaderState* data_after) = 0;
    // AdamW's update number t, clipped against the norm, then every process's parameters
    virtual int update(float lr, int t, double norm) = 0;
    // the sample printed during training (rank 0 only), drawn from *rng
    virtual int sample(unsigned long long* rng, char* msg, size_t msg_size) = 0;
    // a checkpoint of the model and of the training state st (dev/FORMATS.md), rank 0 writing
    virtual int checkpoint(const TrainState* st, const char* model_path, const char* state_path, FILE* logf) = 0;
    // The step's clock: it starts once the work before the step is done, and stops once the step's own
    // is (a GPU's asynchronous launches too). profiler_window: the step an outside profiler sees.
    virtual double step_clock_start(int profiler_window) {
        (void)profiler_window;
        return now_seconds();
    }
    virtual double step_clock_stop(double t0, int profiler_window) {
        (void)profiler_window;
        return now_seconds() - t0;
    }
    // `steps` steps in `seconds` as the step line's FLOP rates, each " | ..." or empty: the model FLOPs
    // utilization against the device's peak (mfu), and the share of the measured matmul rate (share)
    virtual void flop_rates(double seconds, int steps, char* mfu, char* share, size_t size) {
        (void)seconds, (void)steps, (void)size;
        mfu[0] = share[0] = '\0';
    }
    virtual double peak_memory_mib() = 0;
    virtual ProfileShape profile_shape() = 0; // what --profile's costs depend on besides the model
};

// what the loop runs on, set up by the trainer's train_run
struct TrainRun {
    TrainArgs* a;
    DataParallel* dp;         // the run's processes (a world of one alone)
    const GPT2Config* config; // the model's
    DataLoader* train_loader; // -i
    DataLoader* val_loader;   // -j, read with -v > 0
    int start_step;           // 0, or the resumed state's step
    int num_steps;            // the loop visits the tops of steps start_step..num_steps and trains all but the last
    int val_batches;          // per validation, over all processes
    unsigned long long rng;   // the sampling RNG (rank 0's is the run's)
    FILE* logf;               // rank 0's main.log in -o while train_loop runs, else NULL
};

// Opens -i, and -j when -v > 0, on this process: 1, or 0 after printing the error
static int train_data_open(const TrainArgs* a, DataLoader* train, DataLoader* val) {
    char msg[16384]; // the loader's message names the pattern, which may be as long as a path, in full
    if (!dataloader_init(train, a->train_pattern, (size_t)a->B, (size_t)a->T, 1, a->seed, msg, sizeof(msg))) {
        fprintf(stderr, "error: -i %s: %s\n", a->train_pattern, msg);
        return 0;
    }
    if (a->val_every > 0 && !dataloader_init(val, a->val_pattern, (size_t)a->B, (size_t)a->T, 0, a->seed, msg, sizeof(msg))) {
        fprintf(stderr, "error: -j %s: %s (HINT: -v 0 turns validation off)\n", a->val_pattern, msg);
        return 0;
    }
    return 1;
}

// Whether every process passed its checks (ok: this one did; one that failed stops them all) and
// agrees on --check_args: a process that only checks ends there, and the others would wait for it in
// their first collective until --collective_timeout
static int checks_agree(const TrainArgs* a, DataParallel* dp, int ok) {
    return dp_all_ok(dp, ok, "the agreement on the checks") && dp_agree(dp, (uint64_t)a->check_args, "--check_args");
}

// Whether every process is ready (ok: this one is) and read the same data: a process that failed
// stops them all (dp_all_ok)
static int train_data_agree(const TrainArgs* a, DataParallel* dp, int ok, DataLoader* train, DataLoader* val) {
    return dp_all_ok(dp, ok, "the agreement on the data") &&
           dp_agree(dp, train_data_hash(train, a->val_every > 0 ? val : NULL), "their data (-i, -j: the shards' sizes)");
}

// Whether every process holds the same model (its shape and its parameters, params: bytes on the
// host) and the flags that shape its updates (dev/trainer/data_parallel.h's agreement)
static int run_agree(DataParallel* dp, const TrainArgs* a, const GPT2Config* config, const void* params, size_t bytes) {
    const uint64_t h = dp_hash(dp_hash(DP_HASH_SEED, config, sizeof(*config)), params, bytes);
    return dp_agree(dp, train_flags_hash(h, a), "the model or the training flags (" TRAIN_FLAGS_HASHED ")");
}

// Reads this process's next micro-batch (or validation batch) and skips the other processes' before
// it (dev/trainer/data_parallel.h: batch i is process i % P's); seen counts the batches the loader has passed.
static void next_own_batch(DataLoader* loader, const DataParallel* dp, int* seen) {
    while (!dp_owns_batch(dp, *seen)) {
        dataloader_skip_batch(loader);
        (*seen)++;
    }
    dataloader_next_batch(loader);
    (*seen)++;
}

// The run's steps (-x, or one epoch) checked against the resumed step, and its validation batches,
// into run: 1, or 0 after printing the error
static int train_run_plan(TrainRun* run) {
    char msg[16384];
    const TrainArgs* a = run->a;
    run->num_steps = train_num_steps(a, run->train_loader->num_tokens);
    if (!run_steps_check(a, run->start_step, run->num_steps, msg, sizeof(msg))) {
        fprintf(stderr, "error: %s\n", msg);
        return 0;
    }
    run->val_batches = a->val_every > 0 ? val_num_batches(a, run->val_loader->num_batches) : 0;
    return 1;
}

// the run's "batch:" line
static void train_run_describe(const TrainRun* run) {
    const TrainArgs* a = run->a;
    printf("batch: B %d sequences of T %d tokens | %lld tokens per step | %d accumulation steps | %d steps | train %zu tokens | val %d batches\n",
           a->B, a->T, (long long)a->total_batch, a->grad_accum_steps, run->num_steps, run->train_loader->num_tokens,
           run->val_batches);
}

// validation at the top of `step`: every process's share of the batches, their mean loss printed
static int train_validate(Trainer* t, TrainRun* run, int step) {
    DataParallel* dp = run->dp;
    dataloader_reset(run->val_loader);
    for (int i = 0; i < run->val_batches; i++) {
        if (!dp_owns_batch(dp, i)) { // another process's batch
            dataloader_skip_batch(run->val_loader);
            continue;
        }
        dataloader_next_batch(run->val_loader);
        if (!t->eval_forward(run->val_loader)) { return 0; }
    }
    double val_loss = 0.0; // every batch has B*T losses: the mean of the means
    if (!t->mean_loss(&val_loss, "the validation loss's all-reduce")) { return 0; }
    char line[128];
    snprintf(line, sizeof(line), "step %d | val loss %.6f", step, run->val_batches > 0 ? val_loss : 0.0);
    printf("%s\n", line);
    logf_line(run->logf, line);
    return 1;
}

// the loop itself, with run->logf open: returns the process exit code
static int train_steps(Trainer* t, TrainRun* run) {
    TrainArgs* a = run->a;
    DataParallel* dp = run->dp;
    FILE* logf = run->logf;
    const int start_step = run->start_step, num_steps = run->num_steps;
    char msg[16384], line[1024], guard_line[1024];
    char schedule_note[8192]; // a resume with --reschedule 1 says what changes, in the log too
    if (resume_schedule_note(a, num_steps, schedule_note, sizeof(schedule_note))) {
        printf("%s\n", schedule_note);
        logf_line(logf, schedule_note);
    }
    StepGuard guard;
    step_guard_init(&guard, a->resuming ? a->state.skipped : 0);
    train_signals_install();
    int rc = 0, stopped = 0; // stopped: by the stop signal every process agreed on
    double total_time = 0.0;
    int timed_steps = 0;
    // Where the data stands at the top of each step: what a checkpoint saves. (The CUDA trainer's
    // loader itself may be a batch further on: it stages the next step's first batch early.)
    DataLoaderState loader_at_step;
    dataloader_get_state(run->train_loader, &loader_at_step);
    for (int step = start_step; step <= num_steps; step++) {
        int stop_sig = g_train_stop_signal; // read once, and any process's: this step's decisions agree
        dp->step = step;
        if (!dp_max_int(dp, &stop_sig, "the stop signal's all-reduce")) { return 1; }
        if (val_due(a, step, num_steps) && !stop_sig && !train_validate(t, run, step)) { return 1; }
        if (sample_due(a, step, start_step, num_steps)) { // rank 0's RNG is the run's
            const int sampled = dp->rank > 0 || t->sample(&run->rng, msg, sizeof(msg));
            if (!sampled) { train_error(logf, step, msg); }
            if (!dp_all_ok(dp, sampled, "the agreement on the sample")) {
                rc = 1;
                break;
            }
        }
        char model_path[4096] = "", state_path[4096] = "";
        if (checkpoint_due(a, step, start_step, num_steps) || (stop_sig && stop_checkpoint_due(a, step, start_step))) {
            checkpoint_paths(a->output_dir, step, model_path, state_path);
            const TrainState st = train_state_at(a, step, num_steps, guard.skipped, run->rng, &loader_at_step);
            if (!t->checkpoint(&st, model_path, state_path, logf)) {
                rc = 1;
                break;
            }
        }
        if (stop_sig) {
            rc = stop_report(a, stop_sig, step, start_step, model_path, logf);
            dp->agreed_exit = 1;
            stopped = 1;
            break;
        }
        if (step == num_steps) {
            dp->agreed_exit = 1;
            break;
        }

        // --profile: the first profiled step is also the one an outside profiler sees (ncu
        // --profile-from-start off captures exactly one training step)
        const int profiled = a->profile_steps > 0 && step > start_step && step <= start_step + a->profile_steps;
        const int profiler_window = profiled && step == start_step + 1;
        const double t0 = t->step_clock_start(profiler_window);
        if (profiled) { profile_step_begin(); }
        // the gradients, then whether this step may update at all, then the update: a skipped step
        // leaves the weights, the AdamW moments (and master weights) and AdamW's step count t as they were
        double loss = 0.0, norm = 0.0;
        if (!t->gradients(step, &loss, &norm, &loader_at_step)) { return 1; }
        const float lr = learning_rate(a, step, num_steps);
        const StepAction action = step_guard_decide(&guard, a->skip_loss_z, a->skip_grad_z, step + 1, loss, norm,
                                                    guard_line, sizeof(guard_line));
        if (action == STEP_UPDATE && !t->update(lr, step + 1 - guard.skipped, norm)) { return 1; }
        profile_mark(PROF_ADAMW);
        const double dt = t->step_clock_stop(t0, profiler_window); // the step's time includes its update
        if (profiled) { profile_step_end(dt); }
        if (step > start_step) { // the first step pays one-time costs
            total_time += dt;
            timed_steps++;
        }
        char mfu[64], share[64];
        t->flop_rates(dt, 1, mfu, share, sizeof(mfu));
        snprintf(line, sizeof(line), "step %d/%d | loss %.6f | lr %.4e | norm %.4f | %.2f ms | %.0f tok/s%s%s", step + 1,
                 num_steps, loss, (double)lr, norm, dt * 1e3, (double)a->total_batch / dt, mfu, share);
        printf("%s\n", line);
        fflush(stdout);
        logf_line(logf, line);
        if (a->loss_record != NULL && step < a->loss_record_size) { a->loss_record[step] = (float)loss; }
        step_guard_report(action, guard_line, logf);
        if (action == STEP_STOP) { // the guard saw the global loss and norm: every process stops here
            dp->agreed_exit = 1;
            rc = 1;
            break;
        }
    }
    if (rc == 0 && !stopped) { rc = step_guard_finish(&guard, num_steps, logf); }
    a->final_rng = run->rng;
    if (a->profile_steps > 0 && g_profile.steps > 0) {
        const ProfileShape shape = t->profile_shape();
        if (!profile_write(&g_profile, run->config, &shape, a->profile_csv)) { rc = 1; }
    }
    if (timed_steps > 0) {
        char mfu[64], share[64];
        t->flop_rates(total_time, timed_steps, mfu, share, sizeof(mfu));
        snprintf(line, sizeof(line), "summary: %d timed steps | %.2f ms/step | %.0f tok/s%s | peak memory %.0f MiB%s",
                 timed_steps, 1e3 * total_time / timed_steps, (double)a->total_batch * timed_steps / total_time, mfu,
                 t->peak_memory_mib(), share);
        printf("%s\n", line);
        logf_line(logf, line);
    }
    return rc;
}

// The training run of run, from its start_step to its num_steps, on every process: main.log opened
// (rank 0, once every process is ready: dp_all_ok), the steps, main.log closed. Returns the process
// exit code.
static int train_loop(Trainer* t, TrainRun* run) {
    FILE* logf = NULL; // rank 0 writes into -o
    if (!dp_all_ok(run->dp, run->dp->rank > 0 || (output_dir_clear(run->a) && main_log_open(run->a, &logf)),
                   "the agreement on -o")) {
        return 1;
    }
    run->logf = logf;
    const int rc = train_steps(t, run);
    run->logf = NULL;
    if (logf != NULL) { fclose(logf); }
    return rc;
}

#endif // DEV_TRAINER_TRAIN_LOOP_H
