// Put first on the include path of the vkattn core (lib/): a Vulkan include there stops the build.
#error "the vkattn core (lib/: types, checks, shape math, the fp64 references) must not include Vulkan; Vulkan code belongs in host/"
