# Time per slot-mapping call against batch size, from `clbt bench --plot`.
#   gnuplot -e "pocl='pocl.dat'; gpu='h200.dat'; out='plot.png'" tools/bench/plot.gp
set terminal pngcairo size 1100,480 font ",10"
set output out
set multiplot layout 1,2
set logscale x 2
set logscale y 10
set xlabel "decode requests (one token each, 16384-slot buffer)"
set ylabel "microseconds per call, enqueue to completion (median)"
set key top left
set grid
set title "PoCL, 2-core CPU"
plot pocl using 1:2 with linespoints title "clbt slot mapping", \
     pocl using 1:3 with linespoints title "empty kernel", \
     pocl using 1:4 with linespoints title "host loop"
set title "NVIDIA H200, NVIDIA OpenCL"
plot gpu using 1:2 with linespoints title "clbt slot mapping", \
     gpu using 1:3 with linespoints title "empty kernel", \
     gpu using 1:4 with linespoints title "host loop"
unset multiplot
