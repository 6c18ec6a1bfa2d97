"""The simulated Kueue's own admission rules, written from Kueue's source (v0.17) rather than taken from the
dispatcher's placement model, so that the two can disagree and the differential tests against a real Kueue decide.

* :mod:`.requests`: pod set requests (limits as requests, init containers, overhead, transformations);
* :mod:`.specs`: ClusterQueue, Cohort and ResourceFlavor objects;
* :mod:`.quota`: the quota tree (nominal quota, borrowing and lending limits, hierarchical Cohorts, usage);
* :mod:`.flavors`: flavor assignment and flavor fungibility;
* :mod:`.preemption`: classical preemption;
* :mod:`.admission`: what the scheduler nominates for one Workload, partial admission included;
* :mod:`.queues`: the pending queues of the ClusterQueues.
"""
