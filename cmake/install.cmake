# cmake --install: the ABI header and a package config so outside kernels can find_package it.
