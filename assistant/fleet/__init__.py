"""The fleet: inventories and host expressions, transports (ssh, local, replay), fan-out."""
