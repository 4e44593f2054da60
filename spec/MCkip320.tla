-------------------------------- MODULE MCkip320 --------------------------------
(***************************************************************************************)
(* The MCkip279 / MCkip101 model (three replicas, assignment <<2, 3, 1>>, two records,  *)
(* two crashes, fused fetch rounds) under KIP-320: fencing by the current leader epoch  *)
(* refuses the stale follower's fetch, and every invariant holds within these bounds.   *)
(***************************************************************************************)
EXTENDS TruncationKIP320, KafkaInvariants

MC_Assignment == [p \in Partitions |-> <<2, 3, 1>>]

ReproNext ==
    \/ ProduceNext \/ FusedFetchNext \/ CrashNext \/ ControllerRequestsNext
    \/ \E c \in Brokers : BrokerChange(c)
=============================================================================
