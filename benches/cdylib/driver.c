/* Calls the cdylib's function: see run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct times {
    double spinbit, parking_lot, std;
};
struct times cdylib_bench(uint64_t n, uint32_t round);

int main(int argc, char **argv) {
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000000;
    uint32_t round = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 0;
    struct times t = cdylib_bench(n, round);
    printf("cdylib spinbit %.3f parking_lot %.3f std %.3f\n", t.spinbit, t.parking_lot, t.std);
    return 0;
}
