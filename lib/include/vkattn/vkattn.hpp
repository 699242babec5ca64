// Umbrella header.
#pragma once

#include "vkattn/attention.hpp"
#include "vkattn/buffer.hpp"
#include "vkattn/context.hpp"
#include "vkattn/error.hpp"
#include "vkattn/mha.hpp"
#include "vkattn/mha_reference.hpp"
#include "vkattn/mha_types.hpp"
#include "vkattn/numeric.hpp"
#include "vkattn/problem.hpp"
#include "vkattn/reference.hpp"
#include "vkattn/timer.hpp"
#include "vkattn/types.hpp"
#include "vkattn/version.hpp"
