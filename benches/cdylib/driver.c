/* Calls the cdylib's functions: see run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

double cdylib_bench_spinbit(uint64_t n);
double cdylib_bench_parking_lot(uint64_t n);
double cdylib_bench_std(uint64_t n);

int main(int argc, char **argv) {
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000000;
    printf("cdylib spinbit %.2f parking_lot %.2f std %.2f\n", cdylib_bench_spinbit(n),
           cdylib_bench_parking_lot(n), cdylib_bench_std(n));
    return 0;
}
