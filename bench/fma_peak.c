/* The core's f32 FMA peak: 24 independent chains of 512-bit FMAs (enough to cover the FMA
 * latency on two ports), timed in thread CPU time so that a busy machine does not lower it.
 * gcc -O2 -mavx512f -mfma bench/fma_peak.c -o peak && taskset -c 1 ./peak  (docs/codegen.md) */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){
  __m512 a[24]; __m512 b=_mm512_set1_ps(1.0000001f), c=_mm512_set1_ps(1e-7f);
  for(int i=0;i<24;i++) a[i]=_mm512_set1_ps(i);
  long n=200000000/24*4;
  for(int rep=0;rep<3;rep++){
  double t=now();
  for(long it=0;it<n/4;it++){
#pragma GCC unroll 24
    for(int i=0;i<24;i++) a[i]=_mm512_fmadd_ps(a[i],b,c);
  }
  t=now()-t; double fl=(double)(n/4)*24*32;
  float s=0; for(int i=0;i<24;i++) s+=_mm512_reduce_add_ps(a[i]);
  printf("%.1f GFLOP/s (%g)\n", fl/t/1e9, s);}
}
