-------------------------------- MODULE MCunclean --------------------------------
(***************************************************************************************)
(* Unclean leader election loses committed data by design.  Two replicas, assignment    *)
(* <<2, 1>>, broker 1 is the controller.  Leader 2 shrinks the ISR to itself and        *)
(* commits a record alone; it dies; with UncleanElection the controller elects the only *)
(* live replica, 1, which never had the record, and resets the ISR to it.  Violates     *)
(* NoCommittedDataLoss.  Default knobs otherwise (KIP-320 era).                         *)
(***************************************************************************************)
EXTENDS TruncationKIP320, KafkaInvariants

MC_Assignment == [p \in Partitions |-> <<2, 1>>]

ReproNext ==
    \/ ProduceNext \/ FusedFetchNext \/ ShrinkNext \/ CrashNext \/ ControllerRequestsNext
    \/ \E c \in Brokers : BrokerChange(c)
=============================================================================
