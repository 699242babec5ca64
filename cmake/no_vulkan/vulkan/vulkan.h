// Put first on the include path of the vkattn core (core/): a Vulkan include there stops the build.
#error "the vkattn core (core/: types, checks, shape math, the fp64 references) must not include Vulkan; Vulkan code belongs in runtime/"
