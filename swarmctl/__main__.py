from swarmctl.cli import main

main()
