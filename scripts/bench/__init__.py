"""The pieces of ``scripts/bench_chain.py``, the CRF benchmark against other libraries.

* :mod:`bench.engine`: every crfhead import of the benchmark, in one file;
* :mod:`bench.cases`: a benchmark case (size, length regime) and its seeded data;
* :mod:`bench.adapter`: the ops, and what an adapter (one library's calls on one case) is;
* :mod:`bench.anchors`: one adapter per library (:mod:`bench.struct_anchor`: torch-struct's);
* :mod:`bench.timing`: warm-up, median, time cap and peak memory of one call;
* :mod:`bench.machine`: machine description and the CPU time other processes use;
* :mod:`bench.agreement`: the cross-library agreement checks;
* :mod:`bench.reference`: float64 arbiters for the ops pytorch-crf lacks;
* :mod:`bench.run`: one case run end to end (every library timed, then the agreement);
* :mod:`bench.report`: the text and markdown tables.

``bench_chain.py`` imports it as ``bench``: Python puts the script's folder first on ``sys.path``,
so this works from any working directory.
"""
