// llm.c's own CPU loader and forward pass (its train_gpt2.c, from a checkout outside this
// repository), run on a checkpoint this project wrote: proves that llm.c loads our version 3 files
// and computes the same loss. Built and run by dev/tools/llmc_roundtrip.sh.
//
//   llmc_load MODEL.bin SHARD.bin B T   prints "llm.c loss <mean loss of the shard's first B*T+1 tokens>"
#define main llmc_train_main
#include "train_gpt2.c"
#undef main

int main(int argc, char** argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s MODEL.bin SHARD.bin B T\n", argv[0]);
        return 1;
    }
    const int B = atoi(argv[3]), T = atoi(argv[4]);
    GPT2 model;
    gpt2_build_from_checkpoint(&model, argv[1]); // llm.c exits on a version or magic it does not know
    FILE* f = fopen(argv[2], "rb");
    if (f == NULL) {
        fprintf(stderr, "error: %s: cannot open the shard\n", argv[2]);
        return 1;
    }
    int header[256];
    uint16_t* raw = (uint16_t*)malloc((size_t)(B * T + 1) * sizeof(uint16_t));
    int* tokens = (int*)malloc((size_t)(B * T + 1) * sizeof(int));
    if (fread(header, sizeof(int), 256, f) != 256 || header[2] < B * T + 1 ||
        fread(raw, sizeof(uint16_t), (size_t)(B * T + 1), f) != (size_t)(B * T + 1)) {
        fprintf(stderr, "error: %s: expected a shard of at least B*T+1 = %d tokens\n", argv[2], B * T + 1);
        return 1;
    }
    fclose(f);
    for (int i = 0; i <= B * T; i++) { tokens[i] = raw[i]; }
    gpt2_forward(&model, tokens, tokens + 1, (size_t)B, (size_t)T);
    printf("llm.c loss %.6f\n", model.mean_loss);
    free(raw);
    free(tokens);
    gpt2_free(&model);
    return 0;
}
