from divergent.cli import main

main()
