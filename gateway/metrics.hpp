// forwarding header, goes when actors/main.cpp includes actors/metrics/scheduler_metrics.hpp
#include "actors/metrics/scheduler_metrics.hpp"
